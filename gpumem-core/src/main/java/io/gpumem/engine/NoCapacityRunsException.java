package io.gpumem.engine;

/**
 * No device capacity the minimum-capacity search may try ({@link MinimumCapacity#LARGEST} at most) runs a request
 * stream without a failed request: its requests hold more at once than any device could, one of them asks for
 * more than PyTorch allows a single request (1 EB), or the policy caps its own pool below what they need (an
 * {@code rmm-pool} with {@code max}). A fact about the input and the policy's settings, not a fault of the
 * allocator: the message says which figure is out of reach.
 */
public final class NoCapacityRunsException extends RuntimeException {
    private static final long serialVersionUID = 1L;

    public NoCapacityRunsException(String message) {
        super(message);
    }
}
