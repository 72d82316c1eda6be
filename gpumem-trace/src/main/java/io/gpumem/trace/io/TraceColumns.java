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

/**
 * One device's trace as a snapshot file holds it, stored in columns rather than as one {@link TraceEntry} per
 * entry: a file of millions of entries costs about 41 bytes per entry here against about 68 as records in a list
 * (and the several hundred bytes of the dict the pickle decodes each entry into, which the reader drops as soon as
 * an entry is stored). It is a read-only {@link List} of {@link TraceEntry}: {@link #get} builds the record from
 * the columns, so every caller that walks a trace works on it unchanged, and one that wants no record per entry
 * reads the columns ({@link #action}, {@link #addr}, {@link #size}, ...).
 *
 * <p>Layout: columns are cut into chunks of {@value #CHUNK} entries, so that appending never copies what is stored
 * and a trace holds at most one partly used chunk. Streams are indices into a table of the distinct stream handles;
 * frames are indices into a table of the distinct frame lists (by identity: a list the file shares stays shared,
 * and no two equal lists are merged, so a written copy shares exactly what the read file shared); the keys a file
 * entry had are the shared {@link FileKeys#of(int)} forms by their bit set, others indices into a table;
 * {@code device_free} (only {@code oom} entries have it) is kept sparsely.
 *
 * <p>Invariants: entries are only appended, by the reader that builds the trace ({@link #append}), before the
 * trace is handed out; afterwards the columns never change, so a trace may be read from several threads.
 * {@code get(i).equals(e)} for the entry {@code e} appended {@code i}-th.
 */
public final class TraceColumns extends AbstractList<TraceEntry> implements RandomAccess {

    private static final int SHIFT = 16;
    private static final int CHUNK = 1 << SHIFT;
    private static final int MASK = CHUNK - 1;
    private static final TraceAction[] ACTIONS = TraceAction.values();
    /** Key codes below this are the shared {@link FileKeys#of(int)} forms of that bit set. */
    private static final int PLAIN_KEYS = 64;

    private byte[][] actions = new byte[0][];
    private long[][] addrs = new long[0][];
    private long[][] sizes = new long[0][];
    private long[][] times = new long[0][];
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
        addrs[c][i] = addr;
        sizes[c][i] = size;
        times[c][i] = timeUs;
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
        addrs = Arrays.copyOf(addrs, chunk + 1);
        sizes = Arrays.copyOf(sizes, chunk + 1);
        times = Arrays.copyOf(times, chunk + 1);
        streams = Arrays.copyOf(streams, chunk + 1);
        frames = Arrays.copyOf(frames, chunk + 1);
        keys = Arrays.copyOf(keys, chunk + 1);
        actions[chunk] = new byte[CHUNK];
        addrs[chunk] = new long[CHUNK];
        sizes[chunk] = new long[CHUNK];
        times[chunk] = new long[CHUNK];
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
        addrs[c] = Arrays.copyOf(addrs[c], used);
        sizes[c] = Arrays.copyOf(sizes[c], used);
        times[c] = Arrays.copyOf(times[c], used);
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
                addrs[c][i],
                sizes[c][i],
                streamTable[streams[c][i]],
                times[c][i],
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
    public TraceAction action(int index) {
        return ACTIONS[actions[chunkOf(index)][index & MASK]];
    }

    /** The entry's {@code addr} (0 when absent). */
    public long addr(int index) {
        return addrs[chunkOf(index)][index & MASK];
    }

    /** The entry's {@code size} (0 when absent). */
    public long size(int index) {
        return sizes[chunkOf(index)][index & MASK];
    }

    /** The entry's stream handle (0 when absent). */
    public long stream(int index) {
        return streamTable[streams[chunkOf(index)][index & MASK]];
    }

    /** The entry's {@code time_us} (0 when absent). */
    public long timeUs(int index) {
        return times[chunkOf(index)][index & MASK];
    }

    private long deviceFree(int index) {
        int at = Arrays.binarySearch(freeAt, 0, freeCount, index);
        return at >= 0 ? freeBytes[at] : -1;
    }
}
