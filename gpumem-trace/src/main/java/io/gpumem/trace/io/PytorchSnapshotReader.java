package io.gpumem.trace.io;

import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.channels.ReadableByteChannel;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.function.LongConsumer;
import java.util.function.Supplier;

/**
 * Reads PyTorch memory snapshots ({@code torch.cuda.memory._dump_snapshot} pickles) of every format from
 * 2.0 to current into a {@link TraceSnapshot}.
 *
 * <p>One pass over the file, read in chunks (never held whole): the pickle is decoded into plain Java objects
 * (dicts, lists, tuples, ints, strings) by {@link PlainDataUnpickler}, which refuses any opcode that would run code
 * and any declared length longer than the rest of the file. Device trace entries, nearly all of a large file, are
 * handed over as the decoder meets them and stored at once in compact {@link TraceColumns} (the decoded dict of an
 * entry is garbage as soon as it is stored, so memory holds the columns, not a tree of the file); the rest of the
 * tree (segments, settings, annotations) is checked and converted at the end ({@link SnapshotTreeConverter} does
 * both). Every conversion error names the file and the key path ({@code device_traces[0][17].size}).
 *
 * <p>Formats handled: a bare list of segments (2.0 {@code memory_snapshot()}), blocks with {@code history}
 * and without {@code address} (2.0), dicts with {@code device_traces}, with or without {@code time_us},
 * {@code allocator_settings}, {@code external_annotations}, expandable {@code segment_map/unmap}, both
 * spellings of the pending-free state. Unknown keys are kept (entries' {@code extra} maps); an unknown action,
 * an entry without {@code size} (or without {@code addr} where PyTorch always writes one), a negative stream or an
 * {@code allocator_settings} key of the wrong type or range is an error naming the entry and field. Shared frame lists stay shared (one {@code List<Frame>} per
 * pickled list object).
 */
public final class PytorchSnapshotReader {

    /** The most bytes {@link #read(InputStream, String)} holds: the largest array the JVM allocates. */
    private static final int MAX_STREAM_BYTES = Integer.MAX_VALUE - 8;

    private final ReadLimits limits;

    public PytorchSnapshotReader() {
        this(ReadLimits.DEFAULT);
    }

    public PytorchSnapshotReader(ReadLimits limits) {
        this.limits = limits;
    }

    /** Reads a snapshot file. @throws TraceFormatException when the file is missing, too big or malformed */
    public TraceSnapshot read(Path file) {
        return read(file, bytes -> {});
    }

    /**
     * Reads a snapshot file, telling {@code bytesRead} how many of its bytes have been read after each chunk (a
     * progress bar's input: the file is decoded as it is read).
     *
     * @throws TraceFormatException when the file is missing, too big or malformed
     */
    public TraceSnapshot read(Path file, LongConsumer bytesRead) {
        return read(file, bytesRead, PlainDataUnpickler.CHUNK);
    }

    /** {@link #read(Path, LongConsumer)} reading the file {@code chunk} bytes at a time (tests use small chunks). */
    TraceSnapshot read(Path file, LongConsumer bytesRead, int chunk) {
        String name = file.toString();
        long size = limits.checkedFileSize(file);
        SnapshotTreeConverter converter = new SnapshotTreeConverter(name, limits, size);
        Object root;
        try (FileChannel channel = FileChannel.open(file, StandardOpenOption.READ)) {
            ReadableByteChannel counted = new ReadableByteChannel() {
                private long read;

                @Override
                public int read(ByteBuffer dst) throws IOException {
                    int n = channel.read(dst);
                    if (n > 0) {
                        read += n;
                        bytesRead.accept(read);
                    }
                    return n;
                }

                @Override
                public boolean isOpen() {
                    return channel.isOpen();
                }

                // nothing: the file's channel belongs to the try that opened it, which closes it
                @Override
                public void close() {}
            };
            root = unpickle(() -> PlainDataUnpickler.load(counted, size, converter, chunk), name);
        } catch (IOException e) {
            throw new TraceFormatException(name, "", "cannot read: " + e.getMessage(), e);
        }
        return convert(converter, root);
    }

    /**
     * Reads a snapshot from a stream (at most the file-size limit, and at most the 2 GiB an array holds: a stream is
     * read whole, a file in chunks); {@code name} is used in error messages.
     */
    public TraceSnapshot read(InputStream in, String name) {
        long limit = Math.min(MAX_STREAM_BYTES, limits.maxFileBytes());
        byte[] bytes;
        boolean more;
        try {
            bytes = in.readNBytes((int) Math.min(MAX_STREAM_BYTES, limit + 1));
            more = bytes.length == MAX_STREAM_BYTES && in.read() >= 0;
        } catch (IOException e) {
            throw new TraceFormatException(name, "", "cannot read: " + e.getMessage(), e);
        }
        if (bytes.length > limit || more) {
            throw new TraceFormatException(name, "", "input is over the limit of " + limit + " bytes");
        }
        SnapshotTreeConverter converter = new SnapshotTreeConverter(name, limits, bytes.length);
        return convert(converter, unpickle(() -> PlainDataUnpickler.load(bytes, bytes.length, converter), name));
    }

    /**
     * Reads a snapshot the slow way: the whole value tree decoded first, device trace entries included, then
     * converted. What {@link #read(InputStream, String)} gives for the same bytes, which streams the entries to the
     * converter as they are decoded; the tests hold the two together.
     */
    TraceSnapshot readWholeTree(byte[] bytes, String name) {
        return convert(new SnapshotTreeConverter(name, limits, bytes.length), unpickle(bytes, name));
    }

    private static TraceSnapshot convert(SnapshotTreeConverter converter, Object root) {
        try {
            return converter.convert(root);
        } catch (StackOverflowError e) {
            throw new TraceFormatException(converter.file, "", NESTED);
        }
    }

    /** Why a pickle whose values recurse without end (a list inside itself, or nesting thousands deep) is refused. */
    private static final String NESTED = "values nested in themselves or too deeply to be a snapshot";

    /**
     * Decodes the pickle as plain data ({@link PlainDataUnpickler}): code is never run and no declared length
     * may exceed the bytes left.
     */
    static Object unpickle(byte[] bytes, String name) {
        return unpickle(() -> PlainDataUnpickler.load(bytes, bytes.length), name);
    }

    private static Object unpickle(Supplier<Object> decoder, String name) {
        try {
            return decoder.get();
        } catch (TraceFormatException e) {
            throw e; // an entry the sink refused: already names the file, entry and field
        } catch (UncheckedIOException e) {
            throw new TraceFormatException(
                    name, "", "cannot read: " + e.getCause().getMessage(), e);
        } catch (PlainDataUnpickler.Refused e) {
            throw new TraceFormatException(
                    name,
                    "",
                    e.runsCode() ? e.getMessage() : "not a readable pickle (truncated or corrupt): " + e.getMessage());
        } catch (StackOverflowError e) {
            throw new TraceFormatException(name, "", NESTED);
        } catch (RuntimeException e) {
            String why = e.getMessage() == null ? e.getClass().getSimpleName() : e.getMessage();
            throw new TraceFormatException(name, "", "not a readable pickle (truncated or corrupt): " + why, e);
        }
    }
}
