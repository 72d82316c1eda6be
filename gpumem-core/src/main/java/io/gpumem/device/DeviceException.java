package io.gpumem.device;

/**
 * A driver call failed for a reason other than a plain out-of-memory result. Carries the driver's
 * error code and name so that messages read like the driver's own ({@code CUDA_ERROR_INVALID_VALUE}).
 */
public class DeviceException extends RuntimeException {
    private final DeviceError error;
    private final DeviceOp op;

    public DeviceException(DeviceOp op, DeviceError error, String detail) {
        super(op + " failed with " + error.name() + (detail == null || detail.isEmpty() ? "" : ": " + detail));
        this.op = op;
        this.error = error;
    }

    /** The driver error. */
    public DeviceError error() {
        return error;
    }

    /** The operation that failed. */
    public DeviceOp op() {
        return op;
    }
}
