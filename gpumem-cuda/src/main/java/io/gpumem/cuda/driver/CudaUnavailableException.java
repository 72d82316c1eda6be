package io.gpumem.cuda.driver;

/**
 * The CUDA driver cannot be used at all: the library is missing, lacks a symbol gpumem binds, or reports
 * no usable device. Distinct from {@code DeviceException}, which is one failed call on a working driver.
 */
public class CudaUnavailableException extends RuntimeException {
    public CudaUnavailableException(String message) {
        super(message);
    }

    public CudaUnavailableException(String message, Throwable cause) {
        super(message, cause);
    }
}
