package io.gpumem.history;

/** A segment's memory pool, PyTorch's {@code segment_pool_id} tuple; (0, 0) is the default pool. */
public record PoolId(long first, long second) {
    public static final PoolId DEFAULT = new PoolId(0, 0);
}
