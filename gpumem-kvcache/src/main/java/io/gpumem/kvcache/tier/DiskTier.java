package io.gpumem.kvcache.tier;

import io.gpumem.kvcache.KvCacheException;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.lang.foreign.MemorySegment;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.Iterator;

/**
 * The disk tier: one file per block ({@code kv-<32 hex digits of the key>.blk}) under a directory, within
 * a byte budget. Each file is a whole {@link BlockRecord}, checksum included, so a file damaged on disk
 * is detected on load (by {@link KvTiers}) and becomes a miss.
 *
 * <p>The tier owns the files it names: files of that pattern already in the directory are leftovers of
 * an earlier run whose index is gone, and are deleted when the tier opens (the disk tier does not
 * survive a restart). Other files are left alone.
 *
 * <p>Invariants: the in-memory index lists exactly the files this tier wrote and has not deleted,
 * least recently used first; {@code index.size() × recordBytes ≤ capacity}. An I/O error counts as a
 * failed operation and a miss (or a lost write); it never throws to the caller.
 */
public final class DiskTier extends LocalTier<Boolean> {
    private static final String PREFIX = "kv-";
    private static final String SUFFIX = ".blk";

    private final Path dir;
    private final long maxFiles;

    public DiskTier(BlockRecord layout, Path dir, long capacityBytes) {
        super("disk", layout, capacityBytes);
        this.dir = dir;
        this.maxFiles = capacityBytes / recordBytes;
        try {
            Files.createDirectories(dir);
            try (DirectoryStream<Path> stale = Files.newDirectoryStream(dir, PREFIX + "*" + SUFFIX)) {
                for (Path p : stale) {
                    Files.deleteIfExists(p);
                }
            }
        } catch (IOException e) {
            throw new KvCacheException("disk tier: cannot use directory " + dir + ": " + e.getMessage());
        }
    }

    /** The file holding a key's record (whether or not it exists). */
    public Path fileOf(long hi, long lo) {
        return dir.resolve(PREFIX + new BlockKey(hi, lo).hex() + SUFFIX);
    }

    @Override
    boolean store(MemorySegment record, long hi, long lo, Spill spill) {
        BlockKey key = new BlockKey(hi, lo);
        if (index.get(key) != null) {
            return true;
        }
        while (index.size() >= maxFiles) {
            Iterator<BlockKey> lru = index.keySet().iterator();
            BlockKey victim = lru.next();
            lru.remove();
            evicted++;
            delete(victim);
        }
        Path file = fileOf(hi, lo);
        try (FileChannel ch = FileChannel.open(
                file, StandardOpenOption.CREATE, StandardOpenOption.WRITE, StandardOpenOption.TRUNCATE_EXISTING)) {
            ByteBuffer buf = record.asSlice(0, recordBytes).asByteBuffer();
            while (buf.hasRemaining()) {
                ch.write(buf);
            }
        } catch (IOException | UncheckedIOException e) {
            failed++; // one lost write, whatever becomes of the partial file
            try {
                Files.deleteIfExists(file);
            } catch (IOException ignored) {
                // counted above: a write that failed is one failure, not two when its leftover cannot go either
            }
            return false;
        }
        index.put(key, Boolean.TRUE);
        return true;
    }

    @Override
    boolean load(long hi, long lo, MemorySegment dst) {
        BlockKey key = new BlockKey(hi, lo);
        if (index.get(key) == null) {
            return false;
        }
        try (FileChannel ch = FileChannel.open(fileOf(hi, lo), StandardOpenOption.READ)) {
            if (ch.size() == recordBytes) {
                ByteBuffer buf = dst.asSlice(0, recordBytes).asByteBuffer();
                while (buf.hasRemaining()) {
                    if (ch.read(buf) < 0) {
                        return false;
                    }
                }
                return true;
            }
        } catch (IOException | UncheckedIOException e) {
            failed++;
            index.remove(key);
            return false;
        }
        // truncated or grown behind our back: a miss, and the file goes (removed once closed, as every system allows)
        corrupt++;
        remove(hi, lo);
        return false;
    }

    @Override
    void remove(long hi, long lo) {
        BlockKey key = new BlockKey(hi, lo);
        if (index.remove(key) != null) {
            delete(key);
        }
    }

    private void delete(BlockKey key) {
        try {
            Files.deleteIfExists(fileOf(key.hi(), key.lo()));
        } catch (IOException e) {
            failed++;
        }
    }

    @Override
    public void close() {
        for (BlockKey k : index.keySet()) {
            delete(k);
        }
        index.clear();
    }
}
