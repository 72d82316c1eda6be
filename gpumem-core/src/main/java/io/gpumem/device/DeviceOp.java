package io.gpumem.device;

/** The driver operations a {@link Device} exposes, for call counters and fault injection. */
public enum DeviceOp {
    MALLOC,
    FREE,
    MEM_GET_INFO,
    RESERVE_ADDRESS,
    FREE_ADDRESS,
    CREATE_PHYSICAL,
    RELEASE_PHYSICAL,
    MAP,
    SET_ACCESS,
    UNMAP,
    CREATE_STREAM,
    DESTROY_STREAM,
    SYNCHRONIZE_STREAM,
    SYNCHRONIZE_DEVICE,
    CREATE_EVENT,
    RECORD_EVENT,
    QUERY_EVENT,
    SYNCHRONIZE_EVENT,
    DESTROY_EVENT,
    COPY
}
