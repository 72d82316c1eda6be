package io.gpumem.trace.align;

import io.gpumem.alloc.AddressTable;
import io.gpumem.alloc.SizeRules;
import io.gpumem.config.AllocatorConfig;
import io.gpumem.engine.RequestStream;
import io.gpumem.history.Frame;
import io.gpumem.history.TraceAction;
import io.gpumem.history.TraceEntry;
import io.gpumem.trace.io.EntryFields;
import io.gpumem.trace.io.TraceSnapshot;
import io.gpumem.trace.replay.WhatIfReplay;
import io.gpumem.trace.window.RecordedConfig;
import io.gpumem.trace.window.WindowRebuilder;
import io.gpumem.trace.window.WindowStart;
import java.util.Arrays;
import java.util.List;

/**
 * The allocation requests of one device trace, in trace order: the {@code ALLOC} ops of the window's engine
 * {@link RequestStream} (the one request model; this class compiles no requests of its own), with what alignment,
 * step detection, diffs and size laws read beside them. Request {@code r} is the {@code r}-th {@code alloc} entry of
 * the trace, and the {@code r}-th {@code ALLOC} op of the stream.
 *
 * <p>Invariants: every per-request array has {@link #size()} elements; {@code freeEntry[r]} is the index of the
 * first {@code free_requested} (or, where the file has none, {@code free_completed}) entry of the block allocated by
 * {@code r}, after its {@code alloc} entry, or −1 when the block is still live at the window's end (the stream
 * frees at completion: alignment looks at when the program let go of a tensor); {@code site[r]} indexes the
 * {@link FrameSignatures} the sequence was built with, −1 when the entry carries no frames; streams are numbered
 * 0, 1, ... in the order the requests first use them, so that two runs of one program (whose stream handles differ)
 * number their streams alike.
 *
 * <p>The allocated-bytes timeline counts each request at its {@code round_size} under the recorded configuration
 * (what PyTorch's {@code allocated_bytes} adds unless a block was left unsplit), from the rebuilt window start;
 * reserved bytes follow the recorded driver calls from the start's segments.
 */
public final class RequestSequence {

    private final String source;
    private final int device;
    private final RequestStream requests;
    /** The stream op of each request. */
    private final int[] allocOp;

    private final int[] freeEntry;
    private final long[] roundedSize;
    /** The first-use number of each of {@link RequestStream#streams()}. */
    private final int[] streamRank;

    private final int[] site;
    private final boolean framed;
    private final FrameSignatures signatures;
    private final int entryCount;
    private final long startAllocated;
    private final long startReserved;
    private final boolean reservedRecorded;
    private long peakAllocated;
    private int peakAllocatedEntry = -1;
    private long peakReserved;
    private int peakReservedEntry = -1;
    private long allocatedAtPeakReserved;
    private final long[] startBlockSize;
    private final long[] startBlockAddress;
    private final long[] startBlockStream;

    private RequestSequence(
            TraceSnapshot trace, int device, WindowStart start, RequestStream requests, FrameSignatures signatures) {
        this.source = trace.source();
        this.device = device;
        this.reservedRecorded = trace.addressesRecorded();
        this.requests = requests;
        this.signatures = signatures;
        int n = requests.allocs();
        allocOp = new int[n];
        freeEntry = new int[n];
        roundedSize = new long[n];
        site = new int[n];
        streamRank = new int[requests.streams().length];
        Arrays.fill(streamRank, -1);
        List<TraceEntry> entries = trace.traceOf(device);
        EntryFields fields = EntryFields.of(entries); // no record built per request
        entryCount = entries.size();
        AllocatorConfig config = RecordedConfig.of(trace);
        boolean anyFrames = false;
        int ranked = 0;
        for (int k = 0, r = 0; k < requests.length(); k++) {
            if (requests.op(k) != RequestStream.ALLOC) {
                continue;
            }
            allocOp[r] = k;
            freeEntry[r] = -1;
            roundedSize[r] = SizeRules.roundSize(requests.size(k), config);
            if (roundedSize[r] < 0) { // PyTorch's size_t holds it; no allocator serves it (it refuses 1 EiB and more)
                throw new IllegalArgumentException(source + ": entry " + requests.entry(k) + ": a request of "
                        + requests.size(k) + " bytes, rounded up as the allocator rounds it, is past 2^63 - 1 bytes");
            }
            int index = requests.streamIndex(k);
            if (streamRank[index] < 0) {
                streamRank[index] = ranked++;
            }
            List<Frame> frames = fields.frames(requests.entry(k));
            boolean hasFrames = frames != null && !frames.isEmpty();
            anyFrames |= hasFrames;
            site[r++] = hasFrames ? signatures.intern(frames) : -1;
        }
        framed = anyFrames;
        startAllocated = start.allocatedBytes();
        startReserved = start.reservedBytes();
        int blocks = requests.startBlocks();
        startBlockSize = new long[blocks];
        startBlockAddress = new long[blocks];
        startBlockStream = new long[blocks];
        int[] i = {0};
        RequestStream.forEachLiveBlock(requests.startState(), (seg, blk) -> {
            startBlockSize[i[0]] = blk.requestedSize() > 0 ? blk.requestedSize() : blk.size();
            startBlockAddress[i[0]] = blk.address();
            startBlockStream[i[0]++] = seg.stream();
        });
        followLevels(entries, config);
    }

    /**
     * Reads the requests of {@code device}'s trace, interning frame lists in {@code signatures} (share one table
     * between the recordings to be aligned). The window start is rebuilt under the recorded configuration and its
     * requests compiled into the engine's stream.
     *
     * @throws IllegalArgumentException when the device has no alloc entry (a state-only snapshot, an empty trace)
     */
    public static RequestSequence of(TraceSnapshot trace, int device, FrameSignatures signatures) {
        WindowStart start = new WindowRebuilder(RecordedConfig.of(trace)).rebuild(trace, device);
        return of(trace, device, start, new WhatIfReplay(trace, device, start).stream(), signatures);
    }

    /**
     * As {@link #of(TraceSnapshot, int, FrameSignatures)}, over a window already rebuilt and compiled (a session's:
     * {@code start} rebuilt under the recorded configuration, {@code requests} compiled from it as
     * {@link WhatIfReplay} compiles it), so that nothing is rebuilt twice.
     */
    public static RequestSequence of(
            TraceSnapshot trace, int device, WindowStart start, RequestStream requests, FrameSignatures signatures) {
        if (requests.allocs() == 0) {
            throw new IllegalArgumentException(trace.source() + ": device " + device
                    + " has no alloc entry to align (a state-only snapshot or an empty trace)");
        }
        return new RequestSequence(trace, device, start, requests, signatures);
    }

    /**
     * Walks the trace once for what the stream does not keep: the entry that requests each block's free, the
     * allocated and reserved levels and their peaks.
     */
    private void followLevels(List<TraceEntry> entries, AllocatorConfig config) {
        AddressTable<Void> liveByAddr = AddressTable.forInts(); // address -> request, boxing nothing
        int liveAtZero = -1; // a table key cannot be 0, which a malformed trace may still allocate at
        long allocated = startAllocated;
        long reserved = startReserved;
        peakAllocated = allocated;
        peakReserved = reserved;
        allocatedAtPeakReserved = allocated;
        EntryFields fields = EntryFields.of(entries); // no record built per entry
        boolean anyFree = false;
        for (int i = 0; i < entries.size() && !anyFree; i++) {
            anyFree = fields.action(i) == TraceAction.FREE_REQUESTED;
        }
        // While no driver call has taken reserved above the start's, the start is the peak: its moment is then the one
        // of the window at that level with the most allocated (a warm window's start says nothing of the window).
        boolean peakAtStart = true;
        // PyTorch writes a segment_alloc or segment_map just before the alloc it was made for: a new peak reserved
        // set by a driver call is the moment after that alloc (the request is what the memory was reserved for), so
        // the peak waits for the next alloc, unless a driver call lowers reserved first.
        boolean peakAwaitsAlloc = false;
        int r = 0;
        for (int i = 0; i < entries.size(); i++) {
            TraceAction action = fields.action(i);
            switch (action) {
                case ALLOC -> {
                    long addr = fields.addr(i);
                    if (addr == 0) {
                        liveAtZero = r;
                    } else {
                        liveByAddr.putInt(addr, r, -1);
                    }
                    try {
                        allocated = Math.addExact(allocated, roundedSize[r++]);
                    } catch (ArithmeticException e) {
                        throw new IllegalArgumentException(
                                source + ": entry " + i
                                        + ": the requests live at once add up to more than 2^63 - 1 bytes",
                                e);
                    }
                    if (allocated > peakAllocated) {
                        peakAllocated = allocated;
                        peakAllocatedEntry = i;
                    }
                    if (peakAwaitsAlloc) {
                        peakAwaitsAlloc = false;
                        peakReservedEntry = i;
                        allocatedAtPeakReserved = allocated;
                    }
                    if (peakAtStart && reserved == peakReserved && allocated > allocatedAtPeakReserved) {
                        peakReservedEntry = i;
                        allocatedAtPeakReserved = allocated;
                    }
                }
                case FREE_REQUESTED, FREE_COMPLETED -> {
                    if (action == TraceAction.FREE_COMPLETED && anyFree) {
                        break;
                    }
                    long addr = fields.addr(i);
                    int freed;
                    if (addr == 0) {
                        freed = liveAtZero;
                        liveAtZero = -1;
                    } else {
                        freed = liveByAddr.removeInt(addr, -1);
                    }
                    if (freed >= 0) {
                        freeEntry[freed] = i;
                        allocated -= roundedSize[freed];
                    } else {
                        allocated -= SizeRules.roundSize(fields.size(i), config); // a block allocated before the window
                    }
                }
                case SEGMENT_ALLOC, SEGMENT_MAP -> {
                    reserved += fields.size(i);
                    if (reserved > peakReserved) {
                        peakAtStart = false;
                        peakReserved = reserved;
                        peakReservedEntry = i;
                        allocatedAtPeakReserved = allocated;
                        peakAwaitsAlloc = true;
                    }
                }
                case SEGMENT_FREE, SEGMENT_UNMAP -> {
                    reserved -= fields.size(i);
                    peakAwaitsAlloc = false; // reserved fell before an alloc came: the driver call's moment stands
                }
                default -> {}
            }
        }
    }

    /** Number of requests. */
    public int size() {
        return allocOp.length;
    }

    public String source() {
        return source;
    }

    public int device() {
        return device;
    }

    /** The window's request stream these requests are the {@code ALLOC} ops of. */
    public RequestStream requests() {
        return requests;
    }

    /** The request's size as the caller asked for it (unrounded). */
    public long sizeOf(int r) {
        return requests.size(allocOp[r]);
    }

    /** The request's size after {@code round_size}: what it adds to allocated bytes. */
    public long roundedSizeOf(int r) {
        return roundedSize[r];
    }

    /** The request's stream, numbered by first use. */
    public int streamOf(int r) {
        return streamRank[requests.streamIndex(allocOp[r])];
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
        return requests.entry(allocOp[r]);
    }

    /** Trace index of the entry that frees the request's block, −1 when live at the window's end. */
    public int freeEntryOf(int r) {
        return freeEntry[r];
    }

    /** Whether the request's block is live just after trace entry {@code entry}. */
    public boolean liveAt(int r, int entry) {
        return allocEntryOf(r) <= entry && (freeEntry[r] < 0 || freeEntry[r] > entry);
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

    /**
     * Whether the recording holds the caching allocator's driver calls (a PyTorch snapshot, or gpumem's own): false
     * for an RMM log, a lifetime CSV or an ops script, whose reserved bytes are unknown, so that {@link #peakReserved}
     * and the figures at its moment are 0 for want of data, not because nothing was reserved.
     */
    public boolean reservedRecorded() {
        return reservedRecorded;
    }

    /** Peak reserved bytes over the window (recorded driver calls from the rebuilt start). */
    public long peakReserved() {
        return peakReserved;
    }

    /**
     * The moment of peak reserved: the {@code alloc} entry served by the driver call that first takes reserved bytes
     * to {@link #peakReserved()} (PyTorch writes the {@code segment_alloc} or {@code segment_map} just before it; the
     * driver call's own entry when reserved falls, or the trace ends, before an alloc comes); when no driver call
     * takes them above the start's, the entry of the window at that level with the most bytes allocated (the first
     * such), or −1 when none holds more than the start.
     */
    public int peakReservedEntry() {
        return peakReservedEntry;
    }

    /** Allocated bytes at the moment of peak reserved: the rest of the peak is cached, unused memory. */
    public long allocatedAtPeakReserved() {
        return allocatedAtPeakReserved;
    }

    /**
     * Number of blocks live at the window's start (allocated before the window), in the order of
     * {@link RequestStream#forEachLiveBlock}: the stream's start slots.
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
            delta[allocEntryOf(r)] += roundedSize[r];
            if (freeEntry[r] >= 0) {
                delta[freeEntry[r]] -= roundedSize[r];
            }
        }
        long level = startAllocated;
        int r = 0;
        for (int i = 0; i < entryCount && r < size(); i++) {
            if (allocEntryOf(r) == i) {
                out[r++] = level;
            }
            level += delta[i];
        }
        return out;
    }
}
