package io.gpumem.device;

import io.gpumem.config.EnumByKey;

/**
 * Driver error codes a {@link Device} can report, named as the CUDA driver names them
 * ({@code cuGetErrorName}). The numeric codes are the driver's {@code CUresult} values.
 */
public enum DeviceError {
    CUDA_ERROR_INVALID_VALUE(1),
    CUDA_ERROR_OUT_OF_MEMORY(2),
    CUDA_ERROR_NOT_INITIALIZED(3),
    CUDA_ERROR_NO_DEVICE(100),
    CUDA_ERROR_INVALID_DEVICE(101),
    CUDA_ERROR_INVALID_CONTEXT(201),
    CUDA_ERROR_INVALID_HANDLE(400),
    CUDA_ERROR_NOT_FOUND(500),
    CUDA_ERROR_NOT_READY(600),
    CUDA_ERROR_ILLEGAL_ADDRESS(700),
    CUDA_ERROR_NOT_PERMITTED(800),
    CUDA_ERROR_NOT_SUPPORTED(801),
    CUDA_ERROR_UNKNOWN(999);

    private static final EnumByKey<Integer, DeviceError> BY_CODE =
            EnumByKey.of(values(), DeviceError::code, CUDA_ERROR_UNKNOWN);

    private final int code;

    DeviceError(int code) {
        this.code = code;
    }

    /** The driver's numeric {@code CUresult}. */
    public int code() {
        return code;
    }

    /** The error for a driver code; unknown codes map to {@link #CUDA_ERROR_UNKNOWN}. */
    public static DeviceError ofCode(int code) {
        return BY_CODE.get(code);
    }
}
