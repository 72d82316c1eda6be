package io.gpumem.trace.io;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;

/**
 * Size limits a reader enforces before and while reading, so that a huge or hostile file fails with a
 * clear message instead of exhausting memory.
 *
 * @param maxFileBytes largest file accepted (checked before reading)
 * @param maxEntries   largest number of trace entries (all devices) or CSV rows / script lines
 */
public record ReadLimits(long maxFileBytes, long maxEntries) {

    /**
     * 4 GiB files, 50 million entries: far above any public snapshot (the largest dev trace is 19,342 entries), and
     * what the streaming reader holds in a laptop's default heap (about 25 bytes an entry in {@link TraceColumns}; a
     * 1 GB snapshot of {@code gpumem demo} has 16.6 million entries, so the entry limit binds first, near 3 GB).
     */
    public static final ReadLimits DEFAULT = new ReadLimits(4L << 30, 50_000_000L);

    public ReadLimits {
        if (maxFileBytes <= 0 || maxEntries <= 0) {
            throw new IllegalArgumentException("limits must be positive");
        }
    }

    /**
     * The size of a file a reader is about to read, checked against {@link #maxFileBytes()} before any of it is.
     *
     * @throws TraceFormatException naming the file when it is missing, unreadable or too big
     */
    long checkedFileSize(Path file) {
        String name = file.toString();
        long bytes;
        try {
            bytes = Files.size(file);
        } catch (NoSuchFileException e) {
            throw new TraceFormatException(name, "", "no such file");
        } catch (IOException e) {
            throw new TraceFormatException(name, "", "cannot read: " + e.getMessage(), e);
        }
        if (bytes > maxFileBytes) {
            throw new TraceFormatException(
                    name, "", "file is " + bytes + " bytes, over the limit of " + maxFileBytes + " bytes");
        }
        return bytes;
    }
}
