package io.gpumem.cli.device;

/** The device asked for on the command line cannot be opened (no driver, no GPU, bad ordinal). */
public final class DeviceUnavailableException extends RuntimeException {
    public DeviceUnavailableException(String message) {
        super(message);
    }

    public DeviceUnavailableException(String message, Throwable cause) {
        super(message, cause);
    }
}
