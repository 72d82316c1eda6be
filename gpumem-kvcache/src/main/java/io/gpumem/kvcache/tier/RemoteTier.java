package io.gpumem.kvcache.tier;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.charset.StandardCharsets;

/**
 * The remote tier: {@link BlockRecord}s in a {@link RemoteKvStore} shared by serving instances, under
 * keys {@code <namespace><32 hex digits of the block key>}. Instances whose namespaces are equal share
 * blocks; the default one ({@link KvTiers.Builder#remote}) names the model, the KV geometry and the
 * block-key hash, so instances of different models never read each other's blocks (the record header,
 * checked anyway, cannot tell two models of one geometry apart: their keys and tokens are the same).
 *
 * <p>Failures never escape: a throwing store call counts in {@code failed} and is a miss (or a lost
 * write). After a failure the tier stops asking for the next {@code backoffOps} operations (each
 * counted as failed too), so a dead server costs one timeout per back-off period, not one per block.
 */
public final class RemoteTier extends BlockTier {
    private final RemoteKvStore store;
    private final String namespace;
    private final long recordBytes;
    private final int backoffOps;
    private int skipOps;

    public RemoteTier(BlockRecord layout, RemoteKvStore store, String namespace, int backoffOps) {
        super("remote");
        this.store = store;
        this.namespace = namespace;
        this.recordBytes = layout.size();
        this.backoffOps = backoffOps;
    }

    public RemoteKvStore store() {
        return store;
    }

    /** The store key of a block key. */
    public byte[] storeKey(long hi, long lo) {
        return (namespace + new BlockKey(hi, lo).hex()).getBytes(StandardCharsets.US_ASCII);
    }

    @Override
    boolean contains(long hi, long lo) {
        return false;
    }

    @Override
    void touch(long hi, long lo) {}

    private boolean down() {
        if (skipOps > 0) {
            skipOps--;
            failed++;
            return true;
        }
        return false;
    }

    @Override
    boolean store(MemorySegment record, long hi, long lo, Spill spill) {
        if (down()) {
            return false;
        }
        try {
            store.put(storeKey(hi, lo), record.asSlice(0, recordBytes).toArray(ValueLayout.JAVA_BYTE));
            return true;
        } catch (RuntimeException e) {
            failed++;
            skipOps = backoffOps;
            return false;
        }
    }

    @Override
    boolean load(long hi, long lo, MemorySegment dst) {
        if (down()) {
            return false;
        }
        byte[] value;
        try {
            value = store.get(storeKey(hi, lo));
        } catch (RuntimeException e) {
            failed++;
            skipOps = backoffOps;
            return false;
        }
        if (value == null) {
            return false;
        }
        if (value.length != recordBytes) {
            corrupt++;
            return false;
        }
        MemorySegment.copy(value, 0, dst, ValueLayout.JAVA_BYTE, 0, value.length);
        return true;
    }

    @Override
    void remove(long hi, long lo) {
        // A damaged remote value is left for the store to overwrite or evict; other instances check it too.
    }

    @Override
    long usedBytes() {
        return 0;
    }

    @Override
    long capacityBytes() {
        return 0;
    }

    /** Leaves the store open: it is shared, and its owner closes it. */
    @Override
    public void close() {}
}
