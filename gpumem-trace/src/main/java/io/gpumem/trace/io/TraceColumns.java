package io.gpumem.trace.io;

import io.gpumem.history.FileKeys;
import io.gpumem.history.Frame;
import io.gpumem.history.TraceAction;
import io.gpumem.history.TraceEntry;
import java.util.AbstractList;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.IdentityHashMap;
import java.util.List;
import java.util.RandomAccess;
import org.jspecify.annotations.Nullable;

/**
 * One device's trace as a snapshot file holds it, stored in columns rather than as one {@link TraceEntry} per
 * entry: a file of millions of entries costs about 25 bytes per entry here against about 68 as records in a list
 * (and the several hundred bytes of the dict the pickle decodes each entry into, which the reader drops as soon as
 * an entry is stored). It is a read-only {@link List} of {@link TraceEntry}: {@link #get} builds the record from
 * the columns, so every caller that walks a trace works on it unchanged, and one that wants no record per entry
 * reads the columns ({@link #action}, {@link #addr}, {@link #size}, ...).
 *
 * <p>Layout: columns are cut into chunks of {@value #CHUNK} entries, so that appending never copies what is stored
 * and a trace holds at most one partly used chunk; addresses, sizes and times are 32-bit offsets from their chunk's
 * first value where they fit ({@link PackedLongs}). Streams are indices into a table of the distinct stream handles;
 * frames are indices into a table of the distinct frame lists (by identity: a list the file shares stays shared,
 * and no two equal lists are merged, so a written copy shares exactly what the read file shared); the keys a file
 * entry had are the shared {@link FileKeys#of(int)} forms by their bit set, others indices into a table;
 * {@code device_free} (only {@code oom} entries have it) is kept sparsely.
 *
 * <p>Invariants: entries are only appended, by the reader that builds the trace ({@link #append}), before the
 * trace is handed out; afterwards the columns never change, so a trace may be read from several threads.
 * {@code get(i).equals(e)} for the entry {@code e} appended {@code i}-th.
 */
public final class TraceColumns extends AbstractList<TraceEntry> implements RandomAccess, EntryFields {

    private static final int SHIFT = 16;
    private static final int CHUNK = 1 << SHIFT;
    private static final int MASK = CHUNK - 1;
    private static final TraceAction[] ACTIONS = TraceAction.values();
    /** Key codes below this are the shared {@link FileKeys#of(int)} forms of that bit set. */
    private static final int PLAIN_KEYS = 64;

    private byte[][] actions = new byte[0][];
    /** Addresses: blocks are 512-byte aligned, so a chunk's addresses are nearly always 32-bit offsets of 512 B. */
    private final PackedLongs addrs = new PackedLongs(9);

    private final PackedLongs sizes = new PackedLongs(0);
    private final PackedLongs times = new PackedLongs(0);
    private int[][] streams = new int[0][];
    private int[][] frames = new int[0][];
    private int[][] keys = new int[0][];
    private int size;

    private long[] streamTable = new long[4];
    private int streamCount;
    private int lastStream = -1;
    private final List<List<Frame>> frameTable = new ArrayList<>();
    private final IdentityHashMap<List<Frame>, Integer> frameIndex = new IdentityHashMap<>();
    private final List<FileKeys> keyTable = new ArrayList<>();
    private int[] freeAt = new int[0];
    private long[] freeBytes = new long[0];
    private int freeCount;

    /** Appends one entry (what {@code new TraceEntry(...)} with these values would hold). */
    void append(
            TraceAction action,
            long addr,
            long size,
            long stream,
            long timeUs,
            List<Frame> entryFrames,
            long deviceFree,
            FileKeys entryKeys) {
        int c = this.size >>> SHIFT;
        int i = this.size & MASK;
        if (i == 0) {
            grow(c);
        }
        actions[c][i] = (byte) action.ordinal();
        addrs.set(c, i, addr);
        sizes.set(c, i, size);
        times.set(c, i, timeUs);
        streams[c][i] = streamIndex(stream);
        frames[c][i] = framesIndex(entryFrames);
        keys[c][i] = keysCode(entryKeys);
        if (entryKeys.has(TraceEntry.DEVICE_FREE)) {
            if (freeCount == freeAt.length) {
                freeAt = Arrays.copyOf(freeAt, Math.max(4, freeCount * 2));
                freeBytes = Arrays.copyOf(freeBytes, freeAt.length);
            }
            freeAt[freeCount] = this.size;
            freeBytes[freeCount++] = deviceFree;
        }
        this.size++;
    }

    private void grow(int chunk) {
        actions = Arrays.copyOf(actions, chunk + 1);
        addrs.grow(chunk);
        sizes.grow(chunk);
        times.grow(chunk);
        streams = Arrays.copyOf(streams, chunk + 1);
        frames = Arrays.copyOf(frames, chunk + 1);
        keys = Arrays.copyOf(keys, chunk + 1);
        actions[chunk] = new byte[CHUNK];
        streams[chunk] = new int[CHUNK];
        frames[chunk] = new int[CHUNK];
        keys[chunk] = new int[CHUNK];
    }

    /** Drops the unused tail of the last chunk (called once the trace is complete). */
    void trim() {
        int c = size >>> SHIFT;
        int used = size & MASK;
        if (used == 0) {
            return;
        }
        actions[c] = Arrays.copyOf(actions[c], used);
        addrs.trim(c, used);
        sizes.trim(c, used);
        times.trim(c, used);
        streams[c] = Arrays.copyOf(streams[c], used);
        frames[c] = Arrays.copyOf(frames[c], used);
        keys[c] = Arrays.copyOf(keys[c], used);
    }

    private int streamIndex(long stream) {
        if (lastStream >= 0 && streamTable[lastStream] == stream) {
            return lastStream;
        }
        for (int s = 0; s < streamCount; s++) {
            if (streamTable[s] == stream) {
                lastStream = s;
                return s;
            }
        }
        if (streamCount == streamTable.length) {
            streamTable = Arrays.copyOf(streamTable, streamCount * 2);
        }
        streamTable[streamCount] = stream;
        lastStream = streamCount++;
        return lastStream;
    }

    private int framesIndex(List<Frame> list) {
        if (list == null) {
            return -1;
        }
        Integer known = frameIndex.get(list);
        if (known != null) {
            return known;
        }
        int index = frameTable.size();
        frameTable.add(list);
        frameIndex.put(list, index);
        return index;
    }

    private int keysCode(FileKeys k) {
        int present = k.present();
        if (present >= 0
                && present < PLAIN_KEYS
                && k.spelled() == null
                && k.history() == null
                && k.extra().isEmpty()) {
            return present;
        }
        keyTable.add(k);
        return PLAIN_KEYS + keyTable.size() - 1;
    }

    @Override
    public int size() {
        return size;
    }

    @Override
    public TraceEntry get(int index) {
        int c = chunkOf(index);
        int i = index & MASK;
        FileKeys k = keysOf(keys[c][i]);
        return new TraceEntry(
                ACTIONS[actions[c][i]],
                addrs.get(c, i),
                sizes.get(c, i),
                streamTable[streams[c][i]],
                times.get(c, i),
                framesOf(frames[c][i]),
                k.has(TraceEntry.DEVICE_FREE) ? deviceFree(index) : -1,
                k);
    }

    private int chunkOf(int index) {
        if (index < 0 || index >= size) {
            throw new IndexOutOfBoundsException("index " + index + " of " + size + " entries");
        }
        return index >>> SHIFT;
    }

    private FileKeys keysOf(int code) {
        return code < PLAIN_KEYS ? FileKeys.of(code) : keyTable.get(code - PLAIN_KEYS);
    }

    private List<Frame> framesOf(int code) {
        return code < 0 ? null : frameTable.get(code);
    }

    /** The entry's action. */
    @Override
    public TraceAction action(int index) {
        return ACTIONS[actions[chunkOf(index)][index & MASK]];
    }

    /** The entry's {@code addr} (0 when absent). */
    @Override
    public long addr(int index) {
        return addrs.get(chunkOf(index), index & MASK);
    }

    /** The entry's {@code size} (0 when absent). */
    @Override
    public long size(int index) {
        return sizes.get(chunkOf(index), index & MASK);
    }

    /** The entry's stream handle (0 when absent). */
    @Override
    public long stream(int index) {
        return streamTable[streams[chunkOf(index)][index & MASK]];
    }

    /** The entry's frames (null when absent): the interned list {@link #get} would give it. */
    @Override
    public @Nullable List<Frame> frames(int index) {
        return framesOf(frames[chunkOf(index)][index & MASK]);
    }

    @Override
    public void actionOrdinals(int from, int to, byte[] out) {
        checkRange(from, to);
        for (int i = from; i < to; ) {
            int c = i >>> SHIFT;
            int n = Math.min(to, (c + 1) << SHIFT) - i;
            System.arraycopy(actions[c], i & MASK, out, i - from, n);
            i += n;
        }
    }

    @Override
    public void addrs(int from, int to, long[] out) {
        checkRange(from, to);
        addrs.copy(from, to, out);
    }

    @Override
    public void sizes(int from, int to, long[] out) {
        checkRange(from, to);
        sizes.copy(from, to, out);
    }

    @Override
    public void streams(int from, int to, long[] out) {
        checkRange(from, to);
        long[] table = streamTable;
        for (int i = from; i < to; ) {
            int c = i >>> SHIFT;
            int n = Math.min(to, (c + 1) << SHIFT) - i;
            int[] s = streams[c];
            int at = i & MASK;
            int o = i - from;
            for (int j = 0; j < n; j++) {
                out[o + j] = table[s[at + j]];
            }
            i += n;
        }
    }

    private void checkRange(int from, int to) {
        if (from < 0 || to > size || from > to) {
            throw new IndexOutOfBoundsException("entries " + from + " to " + to + " of " + size);
        }
    }

    /**
     * Entries {@code from} to {@code to} (exclusive) as a view that keeps the columns' {@link EntryFields} (a
     * state rebuilt after entry n walks such a suffix).
     */
    @Override
    public List<TraceEntry> subList(int from, int to) {
        subListRangeCheck(from, to, size);
        return new Range(this, from, to - from);
    }

    /** A read-only window of the columns: index i is the columns' {@code from + i}. */
    private static final class Range extends AbstractList<TraceEntry> implements RandomAccess, EntryFields {
        private final TraceColumns columns;
        private final int from;
        private final int size;

        Range(TraceColumns columns, int from, int size) {
            this.columns = columns;
            this.from = from;
            this.size = size;
        }

        private int at(int index) {
            if (index < 0 || index >= size) {
                throw new IndexOutOfBoundsException("index " + index + " of " + size + " entries");
            }
            return from + index;
        }

        @Override
        public int size() {
            return size;
        }

        @Override
        public TraceEntry get(int index) {
            return columns.get(at(index));
        }

        @Override
        public TraceAction action(int index) {
            return columns.action(at(index));
        }

        @Override
        public long addr(int index) {
            return columns.addr(at(index));
        }

        @Override
        public long size(int index) {
            return columns.size(at(index));
        }

        @Override
        public long stream(int index) {
            return columns.stream(at(index));
        }

        @Override
        public @Nullable List<Frame> frames(int index) {
            return columns.frames(at(index));
        }

        @Override
        public void actionOrdinals(int start, int end, byte[] out) {
            subListRangeCheck(start, end, size);
            columns.actionOrdinals(from + start, from + end, out);
        }

        @Override
        public void addrs(int start, int end, long[] out) {
            subListRangeCheck(start, end, size);
            columns.addrs(from + start, from + end, out);
        }

        @Override
        public void sizes(int start, int end, long[] out) {
            subListRangeCheck(start, end, size);
            columns.sizes(from + start, from + end, out);
        }

        @Override
        public void streams(int start, int end, long[] out) {
            subListRangeCheck(start, end, size);
            columns.streams(from + start, from + end, out);
        }

        @Override
        public List<TraceEntry> subList(int start, int end) {
            subListRangeCheck(start, end, size);
            return new Range(columns, from + start, end - start);
        }
    }

    private static void subListRangeCheck(int from, int to, int size) {
        if (from < 0 || to > size || from > to) {
            throw new IndexOutOfBoundsException("entries " + from + " to " + to + " of " + size);
        }
    }

    /** The entry's {@code time_us} (0 when absent). */
    public long timeUs(int index) {
        return times.get(chunkOf(index), index & MASK);
    }

    /**
     * A column of longs cut into chunks that hold 32 bits per value while they can: a chunk's values are its first
     * value plus an {@code int} times {@code 2^shift}. The first value that does not fit turns its chunk into plain
     * longs (copying what it holds), so any value is stored exactly; traces whose neighbouring entries have close
     * addresses, sizes and times (all that PyTorch and gpumem record) cost 4 bytes per value instead of 8.
     */
    private static final class PackedLongs {
        private final int shift;
        private long[] bases = new long[0];
        private int[][] narrow = new int[0][];
        private long[][] wide = new long[0][];

        PackedLongs(int shift) {
            this.shift = shift;
        }

        void grow(int chunk) {
            bases = Arrays.copyOf(bases, chunk + 1);
            narrow = Arrays.copyOf(narrow, chunk + 1);
            wide = Arrays.copyOf(wide, chunk + 1);
            narrow[chunk] = new int[CHUNK];
        }

        void set(int c, int i, long v) {
            int[] n = narrow[c];
            if (n != null) {
                if (i == 0) {
                    bases[c] = v;
                }
                long offset = v - bases[c];
                long units = offset >> shift;
                if (units << shift == offset && units == (int) units) {
                    n[i] = (int) units;
                    return;
                }
                long[] w = new long[n.length];
                for (int j = 0; j < i; j++) {
                    w[j] = bases[c] + ((long) n[j] << shift);
                }
                wide[c] = w;
                narrow[c] = null;
            }
            wide[c][i] = v;
        }

        long get(int c, int i) {
            int[] n = narrow[c];
            return n != null ? bases[c] + ((long) n[i] << shift) : wide[c][i];
        }

        /** Copies values {@code from} to {@code to} (exclusive) into {@code out[0 .. to - from)}. */
        void copy(int from, int to, long[] out) {
            for (int i = from; i < to; ) {
                int c = i >>> SHIFT;
                int n = Math.min(to, (c + 1) << SHIFT) - i;
                int at = i & MASK;
                int o = i - from;
                int[] narrowChunk = narrow[c];
                if (narrowChunk == null) {
                    System.arraycopy(wide[c], at, out, o, n);
                } else {
                    long base = bases[c];
                    for (int j = 0; j < n; j++) {
                        out[o + j] = base + ((long) narrowChunk[at + j] << shift);
                    }
                }
                i += n;
            }
        }

        void trim(int c, int used) {
            if (narrow[c] != null) {
                narrow[c] = Arrays.copyOf(narrow[c], used);
            } else {
                wide[c] = Arrays.copyOf(wide[c], used);
            }
        }
    }

    private long deviceFree(int index) {
        int at = Arrays.binarySearch(freeAt, 0, freeCount, index);
        return at >= 0 ? freeBytes[at] : -1;
    }
}
