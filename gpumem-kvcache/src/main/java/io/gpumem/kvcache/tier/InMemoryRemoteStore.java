package io.gpumem.kvcache.tier;

import java.nio.ByteBuffer;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.Map;

/**
 * An in-process {@link RemoteKvStore} with a byte budget and least-recently-used eviction: the shared
 * store for simulated instances in one JVM ({@code kv-sim --remote memory:SIZE}) and for tests.
 * {@link #setAvailable(boolean) setAvailable(false)} makes every call fail, as a server that went away.
 * Synchronized, so instances on several threads may share it.
 */
public final class InMemoryRemoteStore implements RemoteKvStore {
    private final long capacityBytes;
    private final LinkedHashMap<ByteBuffer, byte[]> map = new LinkedHashMap<>(16, 0.75f, true);
    private long usedBytes;
    private boolean available = true;

    public InMemoryRemoteStore(long capacityBytes) {
        if (capacityBytes <= 0) {
            throw new IllegalArgumentException("remote store budget must be positive, got " + capacityBytes);
        }
        this.capacityBytes = capacityBytes;
    }

    @Override
    public synchronized byte[] get(byte[] key) {
        check();
        return map.get(ByteBuffer.wrap(key));
    }

    @Override
    public synchronized void put(byte[] key, byte[] value) {
        check();
        byte[] old = map.put(ByteBuffer.wrap(key.clone()), value.clone());
        usedBytes += value.length - (old == null ? 0 : old.length);
        Iterator<Map.Entry<ByteBuffer, byte[]>> lru = map.entrySet().iterator();
        while (usedBytes > capacityBytes && lru.hasNext()) {
            usedBytes -= lru.next().getValue().length;
            lru.remove();
        }
    }

    /** Removes a key (tests: a key the store lost). */
    public synchronized void delete(byte[] key) {
        byte[] old = map.remove(ByteBuffer.wrap(key));
        if (old != null) {
            usedBytes -= old.length;
        }
    }

    /** Makes the store reachable or not. */
    public synchronized void setAvailable(boolean available) {
        this.available = available;
    }

    public synchronized int size() {
        return map.size();
    }

    private void check() {
        if (!available) {
            throw new IllegalStateException("in-memory remote store is unavailable");
        }
    }

    @Override
    public String describe() {
        return "memory:" + capacityBytes;
    }
}
