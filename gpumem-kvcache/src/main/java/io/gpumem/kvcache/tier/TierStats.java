package io.gpumem.kvcache.tier;

/**
 * An immutable snapshot of one lower tier's counters.
 *
 * @param tier {@code host}, {@code disk} or {@code remote}
 * @param hits blocks found here by a prefix lookup and promoted to the device
 * @param misses lookups that asked this tier and did not get a usable block
 * @param bytesIn record bytes written into this tier
 * @param bytesOut record bytes read out of this tier for promotion
 * @param stored records written
 * @param evicted records this tier dropped (least recently used first) to stay in its budget
 * @param dropped writes dropped because this tier's queue was full
 * @param failed operations that failed (I/O error, remote store unreachable): each is a miss or a lost write
 * @param corrupt records that failed their checksum or header check (treated as misses; a local tier removes
 *     them, a remote store's value is left for the store to overwrite or evict)
 * @param usedBytes bytes held now
 * @param capacityBytes the byte budget (0 for a remote store, whose server keeps its own)
 */
public record TierStats(
        String tier,
        long hits,
        long misses,
        long bytesIn,
        long bytesOut,
        long stored,
        long evicted,
        long dropped,
        long failed,
        long corrupt,
        long usedBytes,
        long capacityBytes) {}
