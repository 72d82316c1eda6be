package io.gpumem.engine;

/**
 * No device capacity the minimum-capacity search may try ({@link MinimumCapacity#LARGEST} at most) runs a request
 * stream without a failed request: its requests hold more at once than any device could, or one of them asks for
 * more than PyTorch allows a single request (1 EB). A fact about the input, not a fault of the allocator: the
 * message says which figure is out of reach.
 */
public final class NoCapacityRunsException extends RuntimeException {
    private static final long serialVersionUID = 1L;

    public NoCapacityRunsException(String message) {
        super(message);
    }
}
