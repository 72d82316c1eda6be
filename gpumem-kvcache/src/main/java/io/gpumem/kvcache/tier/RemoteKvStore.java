package io.gpumem.kvcache.tier;

/**
 * A byte store shared by serving instances (Redis, Mooncake, an in-process map): the remote tier's
 * back end. Keys and values are opaque bytes; values are whole {@link BlockRecord}s.
 *
 * <p>Contract: {@link #get} returns null for a missing key; any failure (unreachable server, timeout)
 * throws an unchecked exception, which the remote tier counts as a failed operation and treats as a miss
 * or a lost write. Implementations should fail fast (short timeouts): the lookup path waits for
 * {@link #get}. Eviction (least recently used, within the server's memory budget) is the store's own
 * business. Thread-safety is the implementation's; one tier calls it from one thread.
 */
public interface RemoteKvStore extends AutoCloseable {

    /** The value of a key, or null when absent. */
    byte[] get(byte[] key);

    /** Stores a value under a key, replacing any previous one. */
    void put(byte[] key, byte[] value);

    /** A short description for reports, e.g. {@code redis://127.0.0.1:6379}. */
    String describe();

    @Override
    default void close() {}
}
