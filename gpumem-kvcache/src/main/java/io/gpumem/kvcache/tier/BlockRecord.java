package io.gpumem.kvcache.tier;

import io.gpumem.kvcache.KvCacheSpec;
import io.gpumem.kvcache.memory.KvPages;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteOrder;
import java.util.zip.CRC32C;

/**
 * The byte layout of one KV block outside the device: what every lower tier stores, so a block moves
 * between host memory, a disk file and a remote value unchanged.
 *
 * <pre>
 *   0  int   magic 'GKV1'          4  int  block size       8  int  layers    12 int  page bytes
 *  16  long  key hi               24  long key lo
 *  32  long  parent key hi        40  long parent key lo   (0, 0 for a first block)
 *  48  long  salt fingerprint     56  int  adapter id      60  int  flags (bit 0: first block)
 *  64  int[blockSize] tokens
 *   …  layers × pageBytes of KV, layer by layer (each page as on the device: K then V)
 *   …  int   CRC32C of every byte before it
 * </pre>
 *
 * Little-endian throughout. A record is trusted only when its checksum matches and its header names
 * the same geometry and the same block (key, parent key, adapter, salt, tokens) the lookup asks for:
 * a damaged or foreign record is a miss, never wrong KV. The size is fixed for a given
 * {@link KvCacheSpec}, so tiers can keep records in fixed slots.
 */
public final class BlockRecord {
    static final int MAGIC = 0x314B5647; // "GKV1"
    private static final int HEADER = 64;
    private static final ValueLayout.OfInt INT = ValueLayout.JAVA_INT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);
    private static final ValueLayout.OfLong LONG = ValueLayout.JAVA_LONG_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);

    private final int blockSize;
    private final int layers;
    private final long pageBytes;
    private final long payloadOffset;
    private final long crcOffset;
    private final long size;

    public BlockRecord(KvCacheSpec spec) {
        this.blockSize = spec.blockSize();
        this.layers = spec.layers();
        this.pageBytes = spec.pageBytes();
        this.payloadOffset = HEADER + 4L * blockSize;
        this.crcOffset = payloadOffset + layers * pageBytes;
        this.size = crcOffset + 4;
    }

    /** Bytes of one record. */
    public long size() {
        return size;
    }

    /** KV bytes of one record (the part that crosses the device boundary). */
    public long payloadBytes() {
        return layers * pageBytes;
    }

    /**
     * Fills {@code dst} with the header and tokens of {@code id} and the KV of device block {@code block} (one
     * device-to-host copy per layer), and seals it with its checksum.
     */
    public void capture(MemorySegment dst, KvPages pages, int block, BlockIdentity id) {
        dst.set(INT, 0, MAGIC);
        dst.set(INT, 4, blockSize);
        dst.set(INT, 8, layers);
        dst.set(INT, 12, (int) pageBytes);
        dst.set(LONG, 16, id.hi);
        dst.set(LONG, 24, id.lo);
        dst.set(LONG, 32, id.parentHi);
        dst.set(LONG, 40, id.parentLo);
        dst.set(LONG, 48, id.saltFingerprint);
        dst.set(INT, 56, id.adapterId);
        dst.set(INT, 60, id.first ? 1 : 0);
        for (int i = 0; i < blockSize; i++) {
            dst.set(INT, HEADER + 4L * i, id.tokens[id.tokenOffset + i]);
        }
        for (int layer = 0; layer < layers; layer++) {
            pages.readPage(layer, block, dst.asSlice(payloadOffset + layer * pageBytes, pageBytes));
        }
        dst.set(INT, crcOffset, checksum(dst));
    }

    /** Copies a record's KV into a device block (one host-to-device copy per layer). */
    public void restore(MemorySegment src, KvPages pages, int block) {
        for (int layer = 0; layer < layers; layer++) {
            pages.device()
                    .copyToDevice(
                            pages.pageAddress(layer, block),
                            src.asSlice(payloadOffset + layer * pageBytes, pageBytes),
                            pageBytes);
        }
    }

    /** Whether the stored checksum matches the bytes. */
    public boolean intact(MemorySegment record) {
        return record.byteSize() >= size && record.get(INT, crcOffset) == checksum(record);
    }

    /**
     * Whether an intact record holds exactly the block a lookup asks for ({@code id}): same geometry, key, parent
     * key (or first block with the same salt), adapter and tokens.
     */
    public boolean matches(MemorySegment record, BlockIdentity id) {
        if (record.get(INT, 0) != MAGIC
                || record.get(INT, 4) != blockSize
                || record.get(INT, 8) != layers
                || record.get(INT, 12) != (int) pageBytes
                || record.get(LONG, 16) != id.hi
                || record.get(LONG, 24) != id.lo
                || record.get(INT, 56) != id.adapterId
                || (record.get(INT, 60) == 1) != id.first) {
            return false;
        }
        if (id.first
                ? record.get(LONG, 48) != id.saltFingerprint
                : record.get(LONG, 32) != id.parentHi || record.get(LONG, 40) != id.parentLo) {
            return false;
        }
        for (int i = 0; i < blockSize; i++) {
            if (record.get(INT, HEADER + 4L * i) != id.tokens[id.tokenOffset + i]) {
                return false;
            }
        }
        return true;
    }

    /** The key's high half stored in a record. */
    public static long keyHi(MemorySegment record) {
        return record.get(LONG, 16);
    }

    /** The key's low half stored in a record. */
    public static long keyLo(MemorySegment record) {
        return record.get(LONG, 24);
    }

    private int checksum(MemorySegment record) {
        CRC32C crc = new CRC32C();
        crc.update(record.asSlice(0, crcOffset).asByteBuffer());
        return (int) crc.getValue();
    }
}
