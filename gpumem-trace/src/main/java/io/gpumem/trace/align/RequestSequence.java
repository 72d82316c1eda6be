package io.gpumem.trace.align;

import io.gpumem.alloc.SizeRules;
import io.gpumem.config.AllocatorConfig;
import io.gpumem.engine.RequestStream;
import io.gpumem.history.Frame;
import io.gpumem.history.TraceAction;
import io.gpumem.history.TraceEntry;
import io.gpumem.trace.io.TraceSnapshot;
import io.gpumem.trace.window.RecordedConfig;
import io.gpumem.trace.window.WindowRebuilder;
import io.gpumem.trace.window.WindowStart;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * The allocation requests of one device trace, in trace order, as primitive arrays: what alignment, step
 * detection, diffs and size laws read. Request {@code r} is the {@code r}-th {@code alloc} entry of the trace.
 *
 * <p>Invariants: every array has {@link #size()} elements; {@code freeEntry[r]} is the index of the first
 * {@code free_requested} (or, where the file has none, {@code free_completed}) entry of the block allocated by
 * {@code r}, after {@code allocEntry[r]}, or −1 when the block is still live at the window's end; {@code site[r]}
 * indexes the {@link FrameSignatures} the sequence was built with, −1 when the entry carries no frames; streams are
 * numbered 0, 1, ... in the order they first appear, so that two runs of one program (whose stream handles differ)
 * number their streams alike.
 *
 * <p>The allocated-bytes timeline counts each request at its {@code round_size} under the recorded configuration
 * (what PyTorch's {@code allocated_bytes} adds unless a block was left unsplit), from the rebuilt window start;
 * reserved bytes follow the recorded driver calls from the start's segments.
 */
public final class RequestSequence {

    private final String source;
    private final int device;
    private final int[] allocEntry;
    private final int[] freeEntry;
    private final long[] size;
    private final long[] roundedSize;
    private final int[] stream;
    private final int[] site;
    private final boolean framed;
    private final FrameSignatures signatures;
    private final int entryCount;
    private final long startAllocated;
    private final long startReserved;
    private final long peakAllocated;
    private final int peakAllocatedEntry;
    private final long peakReserved;
    private final int peakReservedEntry;
    private final long allocatedAtPeakReserved;
    private final long[] startBlockSize;
    private final long[] startBlockAddress;
    private final long[] startBlockStream;

    private RequestSequence(Builder b) {
        source = b.source;
        device = b.device;
        int n = b.n;
        allocEntry = Arrays.copyOf(b.allocEntry, n);
        freeEntry = Arrays.copyOf(b.freeEntry, n);
        size = Arrays.copyOf(b.size, n);
        roundedSize = Arrays.copyOf(b.roundedSize, n);
        stream = Arrays.copyOf(b.stream, n);
        site = Arrays.copyOf(b.site, n);
        framed = b.framed;
        signatures = b.signatures;
        entryCount = b.entryCount;
        startAllocated = b.startAllocated;
        startReserved = b.startReserved;
        peakAllocated = b.peakAllocated;
        peakAllocatedEntry = b.peakAllocatedEntry;
        peakReserved = b.peakReserved;
        peakReservedEntry = b.peakReservedEntry;
        allocatedAtPeakReserved = b.allocatedAtPeakReserved;
        startBlockSize = b.startBlockSize;
        startBlockAddress = b.startBlockAddress;
        startBlockStream = b.startBlockStream;
    }

    /**
     * Reads the requests of {@code device}'s trace, interning frame lists in {@code signatures} (share one table
     * between the recordings to be aligned). The window start is rebuilt under the recorded configuration.
     *
     * @throws IllegalArgumentException when the device has no alloc entry (a state-only snapshot, an empty trace)
     */
    public static RequestSequence of(TraceSnapshot trace, int device, FrameSignatures signatures) {
        List<TraceEntry> entries = trace.traceOf(device);
        AllocatorConfig config = RecordedConfig.of(trace);
        WindowStart start = new WindowRebuilder(config).rebuild(trace, device);
        Builder b = new Builder(trace.source(), device, entries.size());
        b.startAllocated = start.allocatedBytes();
        b.startReserved = start.reservedBytes();
        b.startBlocks(start);
        Map<Long, Integer> liveByAddr = new HashMap<>();
        Map<Long, Integer> streamRank = new HashMap<>();
        long allocated = b.startAllocated;
        long reserved = b.startReserved;
        b.peakAllocated = allocated;
        b.peakReserved = reserved;
        b.allocatedAtPeakReserved = allocated;
        boolean anyFrames = false;
        boolean anyFree = false;
        for (TraceEntry e : entries) {
            anyFree |= e.action() == TraceAction.FREE_REQUESTED;
        }
        for (int i = 0; i < entries.size(); i++) {
            TraceEntry e = entries.get(i);
            switch (e.action()) {
                case ALLOC -> {
                    List<Frame> frames = e.frames();
                    boolean hasFrames = frames != null && !frames.isEmpty();
                    anyFrames |= hasFrames;
                    long rounded = SizeRules.roundSize(e.size(), config);
                    int r = b.add(
                            i,
                            e.size(),
                            rounded,
                            streamRank.computeIfAbsent(e.stream(), k -> streamRank.size()),
                            hasFrames ? signatures.intern(frames) : -1);
                    liveByAddr.put(e.addr(), r);
                    allocated += rounded;
                    if (allocated > b.peakAllocated) {
                        b.peakAllocated = allocated;
                        b.peakAllocatedEntry = i;
                    }
                }
                case FREE_REQUESTED, FREE_COMPLETED -> {
                    if (e.action() == TraceAction.FREE_COMPLETED && anyFree) {
                        break;
                    }
                    Integer r = liveByAddr.remove(e.addr());
                    if (r != null) {
                        b.freeEntry[r] = i;
                        allocated -= b.roundedSize[r];
                    } else {
                        allocated -= SizeRules.roundSize(e.size(), config); // a block allocated before the window
                    }
                }
                case SEGMENT_ALLOC, SEGMENT_MAP -> {
                    reserved += e.size();
                    if (reserved > b.peakReserved) {
                        b.peakReserved = reserved;
                        b.peakReservedEntry = i;
                        b.allocatedAtPeakReserved = allocated;
                    }
                }
                case SEGMENT_FREE, SEGMENT_UNMAP -> reserved -= e.size();
                default -> {}
            }
        }
        if (b.n == 0) {
            throw new IllegalArgumentException(trace.source() + ": device " + device
                    + " has no alloc entry to align (a state-only snapshot or an empty trace)");
        }
        b.framed = anyFrames;
        b.signatures = signatures;
        return new RequestSequence(b);
    }

    /** Number of requests. */
    public int size() {
        return size.length;
    }

    public String source() {
        return source;
    }

    public int device() {
        return device;
    }

    /** The request's size as the caller asked for it (unrounded). */
    public long sizeOf(int r) {
        return size[r];
    }

    /** The request's size after {@code round_size}: what it adds to allocated bytes. */
    public long roundedSizeOf(int r) {
        return roundedSize[r];
    }

    /** The request's stream, numbered by first appearance. */
    public int streamOf(int r) {
        return stream[r];
    }

    /** The request's frame-list index in the shared {@link FrameSignatures}, −1 without frames. */
    public int siteOf(int r) {
        return site[r];
    }

    /** The table {@link #siteOf} indexes. */
    public FrameSignatures signatures() {
        return signatures;
    }

    /** Whether any request carries frames. */
    public boolean framed() {
        return framed;
    }

    /** Trace index of the request's {@code alloc} entry. */
    public int allocEntryOf(int r) {
        return allocEntry[r];
    }

    /** Trace index of the entry that frees the request's block, −1 when live at the window's end. */
    public int freeEntryOf(int r) {
        return freeEntry[r];
    }

    /** Whether the request's block is live just after trace entry {@code entry}. */
    public boolean liveAt(int r, int entry) {
        return allocEntry[r] <= entry && (freeEntry[r] < 0 || freeEntry[r] > entry);
    }

    /** Number of entries of the device trace. */
    public int entryCount() {
        return entryCount;
    }

    public long startAllocated() {
        return startAllocated;
    }

    public long startReserved() {
        return startReserved;
    }

    /** Peak allocated bytes over the window (rounded request sizes, from the rebuilt start). */
    public long peakAllocated() {
        return peakAllocated;
    }

    /** The entry at which allocated bytes first reach {@link #peakAllocated()}; −1 when the start is the peak. */
    public int peakAllocatedEntry() {
        return peakAllocatedEntry;
    }

    /** Peak reserved bytes over the window (recorded driver calls from the rebuilt start). */
    public long peakReserved() {
        return peakReserved;
    }

    /** The entry at which reserved bytes first reach {@link #peakReserved()}; −1 when the start is the peak. */
    public int peakReservedEntry() {
        return peakReservedEntry;
    }

    /** Allocated bytes at the moment of peak reserved: the rest of the peak is cached, unused memory. */
    public long allocatedAtPeakReserved() {
        return allocatedAtPeakReserved;
    }

    /**
     * Number of blocks live at the window's start (allocated before the window), in the order of
     * {@link RequestStream#forEachLiveBlock}: the engine's start slots.
     */
    public int startBlocks() {
        return startBlockSize.length;
    }

    /** The requested size of start block {@code i} (its block size where the start does not record one). */
    public long startBlockSizeOf(int i) {
        return startBlockSize[i];
    }

    /** The address of start block {@code i}: what a free inside the window names it by. */
    public long startBlockAddressOf(int i) {
        return startBlockAddress[i];
    }

    /** The stream handle of start block {@code i}'s segment. */
    public long startBlockStreamOf(int i) {
        return startBlockStream[i];
    }

    /**
     * Allocated bytes just before each request, {@code [r]} for request {@code r}: the level a step boundary is
     * looked for at (see {@link StepStructure}).
     */
    public long[] allocatedBeforeEachRequest() {
        long[] out = new long[size()];
        // rebuild the level from the requests alone: start + allocs - frees seen before each alloc entry
        long[] delta = new long[entryCount + 1];
        for (int r = 0; r < size(); r++) {
            delta[allocEntry[r]] += roundedSize[r];
            if (freeEntry[r] >= 0) {
                delta[freeEntry[r]] -= roundedSize[r];
            }
        }
        long level = startAllocated;
        int r = 0;
        for (int i = 0; i < entryCount && r < size(); i++) {
            if (allocEntry[r] == i) {
                out[r++] = level;
            }
            level += delta[i];
        }
        return out;
    }

    private static final class Builder {
        final String source;
        final int device;
        final int entryCount;
        int n;
        int[] allocEntry = new int[64];
        int[] freeEntry = new int[64];
        long[] size = new long[64];
        long[] roundedSize = new long[64];
        int[] stream = new int[64];
        int[] site = new int[64];
        boolean framed;
        FrameSignatures signatures;
        long startAllocated;
        long startReserved;
        long peakAllocated;
        int peakAllocatedEntry = -1;
        long peakReserved;
        int peakReservedEntry = -1;
        long allocatedAtPeakReserved;
        long[] startBlockSize = new long[0];
        long[] startBlockAddress = new long[0];
        long[] startBlockStream = new long[0];

        void startBlocks(WindowStart start) {
            int[] n = {0};
            RequestStream.forEachLiveBlock(start.segments(), (seg, blk) -> n[0]++);
            startBlockSize = new long[n[0]];
            startBlockAddress = new long[n[0]];
            startBlockStream = new long[n[0]];
            n[0] = 0;
            RequestStream.forEachLiveBlock(start.segments(), (seg, blk) -> {
                startBlockSize[n[0]] = blk.requestedSize() > 0 ? blk.requestedSize() : blk.size();
                startBlockAddress[n[0]] = blk.address();
                startBlockStream[n[0]++] = seg.stream();
            });
        }

        Builder(String source, int device, int entryCount) {
            this.source = source;
            this.device = device;
            this.entryCount = entryCount;
        }

        int add(int entry, long bytes, long rounded, int streamIndex, int siteIndex) {
            if (n == size.length) {
                int cap = n * 2;
                allocEntry = Arrays.copyOf(allocEntry, cap);
                freeEntry = Arrays.copyOf(freeEntry, cap);
                size = Arrays.copyOf(size, cap);
                roundedSize = Arrays.copyOf(roundedSize, cap);
                stream = Arrays.copyOf(stream, cap);
                site = Arrays.copyOf(site, cap);
            }
            allocEntry[n] = entry;
            freeEntry[n] = -1;
            size[n] = bytes;
            roundedSize[n] = rounded;
            stream[n] = streamIndex;
            site[n] = siteIndex;
            return n++;
        }
    }
}
