package io.gpumem.trace.replay;

import io.gpumem.alloc.AllocatorInternals;
import io.gpumem.alloc.CachingAllocator;
import io.gpumem.alloc.SlotSession;
import io.gpumem.config.AllocatorConfig;
import io.gpumem.engine.RequestStream;
import io.gpumem.engine.StartStateLoader;
import io.gpumem.history.DriverCallListener;
import io.gpumem.history.Frame;
import io.gpumem.history.HistoryOptions;
import io.gpumem.history.MemorySnapshot;
import io.gpumem.history.SegmentInfo;
import io.gpumem.history.TraceAction;
import io.gpumem.history.TraceEntry;
import io.gpumem.oom.OutOfMemoryException;
import io.gpumem.trace.io.EntryFields;
import io.gpumem.trace.window.WindowStart;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.function.Consumer;
import java.util.function.LongUnaryOperator;
import org.jspecify.annotations.Nullable;

/**
 * One device trace replayed by {@link OracleReplay}: the window compiled into the engine's {@link RequestStream}
 * (with the recording's decisions beside it, {@link RecordedDecisions}), played on the model allocator over its
 * {@link OracleDevice}, with the fidelity counters and (when asked) the trace the replay writes
 * ({@link ReplayedTrace}).
 *
 * <p>The play loop reads primitive arrays only: each op's request, the recorded address of an alloc, the
 * recorded driver calls. The model is played through a {@link SlotSession} (one lock for the whole play, no
 * address table): an alloc fills its op's slot and a free releases the slot's block, wherever the model put it,
 * so a block the model placed elsewhere needs no translation table; the start state's allocated blocks are
 * adopted into their slots first. The model's driver calls are seen through a {@link DriverCallListener} as
 * plain fields ({@link #eventAction}, ...) and compared, in order, by action, address and size, with the recorded
 * ones since the last comparison: after each alloc, and before and after each release run (an
 * {@code empty_cache} op). Nothing is built or boxed per op unless a trace is written.
 *
 * <p>Writing a trace walks the recorded entries between ops too (an {@code oom}, a {@code free_requested} of a
 * trace with completions, annotations: written as recorded) and sees every model entry through a trace tracker
 * ({@link #pending}); then the model's clock reads the recorded {@code time_us} of the entry being replayed, and
 * its context supplier the entry's frames, so the blocks and segments it creates carry the recording's stacks.
 * Single use, not thread-safe.
 */
final class DeviceReplay {

    private final int deviceIndex;
    private final List<TraceEntry> trace;
    /** The trace's fields by index (its columns when it has them: no record built per entry read). */
    private final EntryFields fields;

    private final boolean hasCompletions;
    private final OracleDevice device;
    private final CachingAllocator allocator;
    private final RequestStream stream;
    private final RecordedDecisions recorded;
    /**
     * The model's address of each slot; 0 when not allocated (its alloc failed) or freed by its own op (a block a
     * dropped free released by address keeps its address here, so that its own free then fails as a free by
     * address would).
     */
    private final long[] slotAddress;
    /** {@link OracleWindow#waitingAtEnd}: recorded address to stream. */
    private final Map<Long, Long> waitingAtEnd;
    /** Slots {@code 0 .. startBlocks} are the start state's live blocks. */
    private final int startBlocks;
    /** The session the play runs in (open during {@link #run}). */
    private @Nullable SlotSession session;

    private final @Nullable ReplayedTrace written;
    /** Recorded address → model address of live blocks the model placed elsewhere (only when writing). */
    private final Map<Long, Long> moved = new HashMap<>();
    /** Entries the model emitted since the last comparison, oldest first (when writing a trace). */
    private final List<TraceEntry> pending = new ArrayList<>();
    /** The driver calls among them, as plain fields (when not writing): {@code eventCount} of them. */
    private TraceAction[] eventAction = new TraceAction[16];

    private long[] eventAddr = new long[16];
    private long[] eventSize = new long[16];
    private int eventCount;
    /** Recorded driver calls before this index are compared; those before {@link #offered} are offered. */
    private int compared;
    /** The recorded driver calls before this index precede the entry of the op being played ({@link #callsBefore}). */
    private int callCursor;

    private int offered;
    /** Trace entries before this index are written (when writing). */
    private int writtenUpTo;
    /** Frees the stream dropped before this index are done. */
    private int droppedDone;

    private final List<String> notes = new ArrayList<>();
    private final Consumer<TraceEntry> tracker = pending::add;
    private final DriverCallListener listener = this::driverCall;

    private @Nullable TraceEntry current;
    private long allocs;
    private long exact;
    private long releaseRuns;
    private long unknownFrees;
    private long segmentMatched;
    /** Recorded driver calls the replay reached (all of them unless it stopped early). */
    private int segmentEvents;

    private @Nullable Mismatch firstMismatch;

    /**
     * {@link WindowStart#segmentAllocBeforeWindow}: the segment the window's first alloc was served from, cudaMalloc'd
     * before the window opened (0 when none). Offered to that alloc; the model's cudaMalloc of it is the recording's
     * cut-off {@code segment_alloc}, counted as a recorded driver call and compared here ({@link #openingCallMatched}).
     */
    private final long openingSegment;

    private boolean openingCallMatched;

    /**
     * @param window the prepared window this replay plays
     * @param write whether to build the trace the replay writes ({@link #writtenTrace()})
     */
    DeviceReplay(OracleWindow window, AllocatorConfig config, long totalMemory, boolean write) {
        this.deviceIndex = window.device();
        this.trace = window.trace();
        this.fields = EntryFields.of(trace);
        this.hasCompletions = window.hasCompletions();
        this.device = new OracleDevice(totalMemory, window.start());
        // A check reads the model's decisions and end state, never its counters: a counted model is only needed for
        // the snapshot a written trace goes into.
        this.allocator = write ? new CachingAllocator(device, config) : CachingAllocator.uncounted(device, config);
        this.written = write ? new ReplayedTrace(hasCompletions) : null;
        this.stream = window.stream();
        this.recorded = window.recorded();
        this.waitingAtEnd = window.waitingAtEnd();
        this.openingSegment = window.start().segmentAllocBeforeWindow();
        this.slotAddress = new long[stream.slots()];
        allocator.internals().expectLiveBlocks(window.peakLiveBlocks());
        List<SegmentInfo> start = window.start().segments();
        int[] slot = {0};
        RequestStream.forEachLiveBlock(start, (seg, b) -> slotAddress[slot[0]++] = b.address());
        this.startBlocks = slot[0];
        StartStateLoader.load(allocator.internals(), device, start, device, false, LongUnaryOperator.identity());
        if (write) {
            // Live blocks and segments keep the stack of the request that made them; the trace is the tracker's.
            allocator.recordHistory(new HistoryOptions(HistoryOptions.Enabled.STATE, HistoryOptions.Context.STATE, 1));
            allocator.setContextSupplier(this::currentFrames);
            allocator.internals().setClock(() -> current == null ? 0 : current.timeUs());
            allocator.internals().attachTraceTracker(tracker);
        } else {
            allocator.internals().attachDriverCallListener(listener);
        }
    }

    /**
     * Moves the start state's allocated blocks into their slots; a live start block freed but waiting on events is
     * no allocation to adopt, and its free in the window fails as a free of it by address would.
     */
    private void adoptStartBlocks(SlotSession s) {
        for (int slot = 0; slot < startBlocks; slot++) {
            long at = slotAddress[slot];
            if (at != 0) {
                s.adopt(slot, at);
            }
        }
    }

    private SlotSession openSession() {
        SlotSession s = session;
        if (s == null) {
            throw new IllegalStateException("the replay plays only inside run()");
        }
        return s;
    }

    private void driverCall(TraceAction action, long addr, long size, long stream) {
        if (eventCount == eventAction.length) {
            eventAction = Arrays.copyOf(eventAction, eventCount * 2);
            eventAddr = Arrays.copyOf(eventAddr, eventCount * 2);
            eventSize = Arrays.copyOf(eventSize, eventCount * 2);
        }
        eventAction[eventCount] = action;
        eventAddr[eventCount] = addr;
        eventSize[eventCount++] = size;
    }

    private List<Frame> currentFrames() {
        TraceEntry c = current;
        return c == null || c.frames() == null ? List.of() : c.frames();
    }

    /** Replays the whole window, reporting progress every 16k entries. */
    DeviceFidelity run(ProgressListener progress, long doneBefore, long total) {
        try (SlotSession s = allocator.internals().openSlots(stream.slots())) {
            session = s;
            adoptStartBlocks(s);
            int nextProgress = 0x4000;
            int comparedAtEnd = recorded.calls.length;
            for (int k = 0; k < stream.length(); k++) {
                int entry = stream.entry(k);
                if (entry >= nextProgress) {
                    progress.progress(doneBefore + entry, total);
                    nextProgress = (entry | 0x3fff) + 1;
                }
                // Dropped frees first: they come earlier in the trace, write what precedes them and leave `current` at
                // their own entry, which the op's request must not inherit.
                if (droppedDone < recorded.dropped.length) {
                    freeDroppedUpTo(entry);
                }
                if (written != null) {
                    writeRecordedUpTo(entry);
                    current = trace.get(entry);
                }
                byte op = stream.op(k);
                if (op == RequestStream.ALLOC) {
                    if (!alloc(k, entry)) {
                        comparedAtEnd = callsBefore(entry);
                        break;
                    }
                } else if (op == RequestStream.FREE) {
                    free(k, entry);
                } else if (op == RequestStream.EMPTY_CACHE) {
                    // The OOM-retry path releases exactly what empty_cache() does.
                    int before = callsBefore(entry);
                    compareDriverCalls(entry, before);
                    openSession().emptyCache();
                    releaseRuns++;
                    compareDriverCalls(entry, releaseRunEnd(before));
                }
            }
            if (comparedAtEnd == recorded.calls.length) {
                freeDroppedUpTo(trace.size());
            }
            segmentEvents = comparedAtEnd;
            compareDriverCalls(trace.size(), comparedAtEnd);
        } finally {
            session = null;
        }
        if (segmentEvents == recorded.calls.length && !waitingAtEnd.isEmpty()) {
            leaveRequestedFreesWaiting();
        }
        if (written != null) {
            writeRecordedUpTo(trace.size());
            allocator.internals().detachTraceTracker(tracker);
        } else {
            allocator.internals().detachDriverCallListener(listener);
        }
        return fidelity();
    }

    /**
     * Frees, as PyTorch did, the blocks whose free was requested (in the window or before it) and not completed by its
     * end ({@code record_stream}: the block waits on another stream's events; {@link OracleWindow#waitingAtEnd}): the
     * model frees at {@code free_completed}, so it still holds them allocated where the recording shows them
     * {@code active_pending_free}. Each is freed with a use recorded on a stream other than its own, whose event the
     * end state never sees complete (events are processed by the next malloc or release, and the window has none).
     */
    private void leaveRequestedFreesWaiting() {
        for (Map.Entry<Long, Long> w : waitingAtEnd.entrySet()) {
            long at = translated(w.getKey());
            try {
                allocator.recordStream(at, ~w.getValue()); // (the complement of the block's stream is another)
                allocator.free(at);
            } catch (IllegalArgumentException ex) {
                // not allocated in the model: nothing to leave waiting
            }
        }
        pending.clear(); // the free requests are written as recorded
        eventCount = 0;
    }

    /**
     * How many recorded driver calls come before trace entry {@code entry}: the player asks in the order of its ops,
     * whose entries never go back, so a cursor walks the calls once.
     */
    private int callsBefore(int entry) {
        int[] calls = recorded.calls;
        int c = callCursor;
        while (c < calls.length && calls[c] < entry) {
            c++;
        }
        callCursor = c;
        return c;
    }

    /**
     * The end of the release run whose calls start at {@code first} (an EMPTY_CACHE op's entry): the
     * {@code segment_free}/{@code segment_unmap} entries that follow that one without a gap in the trace.
     */
    private int releaseRunEnd(int first) {
        int[] calls = recorded.calls;
        int end = first;
        while (end < calls.length
                && calls[end] == calls[first] + (end - first)
                && WindowStreams.isRelease(fields.action(calls[end]))) {
            end++;
        }
        return end;
    }

    /** Offers the device the recorded driver allocations since the last offer, runs op {@code k}'s malloc. */
    private boolean alloc(int k, int entry) {
        allocs++;
        int upTo = callsBefore(entry);
        boolean opening = openingSegment != 0 && entry == 0;
        boolean offers = offered < upTo || opening;
        if (opening) {
            device.offerMalloc(openingSegment);
        }
        for (; offered < upTo; offered++) {
            int call = recorded.calls[offered];
            TraceAction action = fields.action(call);
            if (action == TraceAction.SEGMENT_ALLOC) {
                device.offerMalloc(fields.addr(call));
            } else if (action == TraceAction.SEGMENT_MAP) {
                device.offerMap(fields.addr(call));
            }
        }
        long want = recorded.address[stream.slot(k)];
        long got;
        try {
            got = openSession().malloc(stream.slot(k), stream.size(k), stream.stream(k));
        } catch (OutOfMemoryException ex) {
            mismatch(entry, "alloc", hex(want), "out of memory");
            if (offers) {
                device.clearOffers();
            }
            compareDriverCalls(entry, upTo);
            return true;
        } catch (IllegalStateException ex) {
            mismatch(entry, "alloc", hex(want), "error: " + ex.getMessage());
            notes.add("replay of this device stopped at entry " + entry + ": " + ex.getMessage());
            return false;
        }
        if (offers) {
            device.clearOffers();
        }
        slotAddress[stream.slot(k)] = got;
        if (opening) {
            takeOpeningCall();
        }
        if (got == want) {
            exact++;
            if (written != null && !moved.isEmpty()) {
                moved.remove(want);
            }
        } else {
            if (written != null) {
                moved.put(want, got);
            }
            mismatch(entry, "alloc", hex(want), hex(got));
        }
        compareDriverCalls(entry, upTo);
        return true;
    }

    /**
     * Takes the model's cudaMalloc of {@link #openingSegment}, made for the window's first alloc, out of the calls to
     * compare: it is the recording's {@code segment_alloc} from before the window, and matches it when it is the
     * model's first call at that address (the offered one). A model that made no such call is compared as usual.
     */
    private void takeOpeningCall() {
        if (written != null) {
            for (int i = 0; i < pending.size(); i++) {
                TraceEntry m = pending.get(i);
                if (m.action().isSegmentEvent()) {
                    if (m.action() == TraceAction.SEGMENT_ALLOC && m.addr() == openingSegment) {
                        pending.remove(i);
                        openingCallMatched = true;
                    }
                    return;
                }
            }
        } else if (eventCount > 0 && eventAction[0] == TraceAction.SEGMENT_ALLOC && eventAddr[0] == openingSegment) {
            eventCount--;
            System.arraycopy(eventAction, 1, eventAction, 0, eventCount);
            System.arraycopy(eventAddr, 1, eventAddr, 0, eventCount);
            System.arraycopy(eventSize, 1, eventSize, 0, eventCount);
            openingCallMatched = true;
        }
    }

    /** Frees op {@code k}'s slot where the model put it (nothing when its alloc failed). */
    private void free(int k, int entry) {
        int slot = stream.slot(k);
        long at = slotAddress[slot];
        slotAddress[slot] = 0;
        if (written != null && !moved.isEmpty()) {
            moved.remove(fields.addr(entry));
        }
        if (at == 0) {
            unknownFree(entry, fields.addr(entry), "its alloc failed in the replay");
        } else {
            try {
                // (by address when the session does not hold it there: a start block it could not adopt, freed but
                // waiting on events, or a block a dropped free released)
                openSession().free(slot, at);
            } catch (IllegalArgumentException ex) {
                unknownFree(entry, at, ex.getMessage());
            }
        }
        handOver();
    }

    /**
     * Frees at their recorded address the blocks of the frees before {@code entry} that the stream dropped (no
     * block of the window was live there): whatever the model holds at that address, as a free by address would.
     */
    private void freeDroppedUpTo(int entry) {
        for (; droppedDone < recorded.dropped.length && recorded.dropped[droppedDone] < entry; droppedDone++) {
            int at = recorded.dropped[droppedDone];
            long addr = fields.addr(at);
            if (written != null) {
                writeRecordedUpTo(at);
                current = trace.get(at);
                Long m = moved.isEmpty() ? null : moved.remove(addr);
                addr = m != null ? m : addr;
            }
            try {
                openSession().freeAddress(addr);
            } catch (IllegalArgumentException ex) {
                unknownFree(at, addr, ex.getMessage());
            }
            handOver();
        }
    }

    private void unknownFree(int entry, long addr, @Nullable String why) {
        if (unknownFrees++ == 0) {
            notes.add("entry " + entry + ": free of " + hex(addr) + " that the model does not hold (" + why + ")");
        }
    }

    /**
     * Writes the recorded entries before {@code entry} that are no op of the stream: an {@code oom}, a
     * {@code snapshot} or annotation as recorded, a {@code free_requested} of a trace with completions at the
     * block's model address; driver calls are written when compared, and frees the stream dropped not at all.
     */
    private void writeRecordedUpTo(int entry) {
        ReplayedTrace w = written;
        for (; writtenUpTo < entry; writtenUpTo++) {
            TraceEntry e = trace.get(writtenUpTo);
            TraceAction a = e.action();
            if (a.isSegmentEvent() || a == TraceAction.FREE_COMPLETED) {
                continue;
            }
            if (a == TraceAction.FREE_REQUESTED) {
                if (hasCompletions) {
                    w.addRecorded(e, translated(e.addr()));
                }
                continue;
            }
            w.addRecorded(e, e.addr());
        }
        writtenUpTo = Math.max(writtenUpTo, entry + 1);
    }

    private long translated(long recordedAddress) {
        Long m = moved.get(recordedAddress);
        return m == null ? recordedAddress : m;
    }

    /** Hands the model's entries that are not driver calls, emitted while serving a free, to the writer. */
    private void handOver() {
        if (written != null) {
            for (TraceEntry m : pending) {
                written.addModel(m, current);
            }
        }
        pending.clear();
        eventCount = 0;
    }

    /**
     * Compares the model's driver calls since the last comparison with the recorded ones not yet compared, up to
     * {@code upTo}, in order, by action, address and size, and hands every pending entry to the writer: a matched
     * driver call as recorded, any other as the model made it, attributed to the entry being replayed.
     */
    private void compareDriverCalls(int at, int upTo) {
        if (written != null) {
            compareAndWrite(at, upTo);
            return;
        }
        int k = 0;
        for (int j = 0; j < eventCount; j++, k++) {
            compareOne(k, at, upTo, eventAction[j], eventAddr[j], eventSize[j]);
        }
        missingCalls(k, upTo);
    }

    /** {@link #compareDriverCalls} when writing a trace: every pending entry is also handed to the writer. */
    private void compareAndWrite(int at, int upTo) {
        ReplayedTrace w = written;
        int k = 0;
        for (TraceEntry m : pending) {
            if (!m.action().isSegmentEvent()) {
                w.addModel(m, current);
                continue;
            }
            if (compareOne(k, at, upTo, m.action(), m.addr(), m.size())) {
                TraceEntry matched = trace.get(recorded.calls[compared + k]);
                w.addRecorded(matched, matched.addr());
            } else {
                w.addModel(m, current);
            }
            k++;
        }
        missingCalls(k, upTo);
    }

    /**
     * Compares the model's {@code k}-th driver call since the last comparison with the {@code k}-th recorded one
     * not yet compared, reading the recorded fields in place; a mismatch is noted.
     */
    private boolean compareOne(int k, int at, int upTo, TraceAction action, long addr, long size) {
        int j = compared + k;
        if (j < upTo) {
            int call = recorded.calls[j];
            if (fields.action(call) == action && fields.addr(call) == addr && fields.size(call) == size) {
                segmentMatched++;
                return true;
            }
            mismatch(
                    call,
                    "segment",
                    describe(fields.action(call), fields.addr(call), fields.size(call)),
                    describe(action, addr, size));
        } else {
            mismatch(at, "segment", "no driver call", describe(action, addr, size));
        }
        return false;
    }

    /** Notes the recorded driver calls from the {@code k}-th on as not made, and starts the next comparison. */
    private void missingCalls(int k, int upTo) {
        for (int j = compared + k; j < upTo; j++) {
            int call = recorded.calls[j];
            mismatch(
                    call,
                    "segment",
                    describe(fields.action(call), fields.addr(call), fields.size(call)),
                    "no driver call");
        }
        compared = Math.max(compared, upTo);
        pending.clear();
        eventCount = 0;
    }

    private void mismatch(int entry, String kind, String expectedText, String got) {
        if (firstMismatch != null) {
            return;
        }
        StringBuilder ctx = new StringBuilder();
        for (int j = Math.max(0, entry - 4); j <= Math.min(entry, trace.size() - 1); j++) {
            if (!ctx.isEmpty()) {
                ctx.append("; ");
            }
            ctx.append('#').append(j).append(' ').append(trace.get(j));
        }
        firstMismatch = new Mismatch(deviceIndex, entry, kind, expectedText, got, ctx.toString());
    }

    private static String describe(TraceAction a, long addr, long size) {
        return a.wireName() + " " + hex(addr) + " size " + size;
    }

    private static String hex(long address) {
        return "0x" + Long.toHexString(address);
    }

    /** The model allocator's internals, to read its end state after {@link #run}. */
    AllocatorInternals model() {
        return allocator.internals();
    }

    /** The model's end state as a snapshot (call after {@link #run}; for the snapshot a replay writes). */
    MemorySnapshot modelSnapshot() {
        return allocator.snapshot();
    }

    /** The trace the replay writes (only when built with {@code write}). */
    List<TraceEntry> writtenTrace() {
        return written.entries();
    }

    private DeviceFidelity fidelity() {
        if (unknownFrees > 1) {
            notes.add(unknownFrees + " frees in all hit blocks the model does not hold");
        }
        long oomEntries = recorded.oomEntries;
        if (oomEntries > 0) {
            notes.add(oomEntries + " oom entr" + (oomEntries == 1 ? "y" : "ies")
                    + ": the request failed in the recording and allocates nothing in the replay");
        }
        if (openingSegment != 0) {
            notes.add("the window opens inside its first request: the segment_alloc of " + hex(openingSegment)
                    + " for it came before the window, and counts as a recorded driver call");
        }
        if (device.syntheticAddresses() > 0) {
            notes.add(device.syntheticAddresses() + " driver allocations the recording does not have");
        }
        return new DeviceFidelity(
                deviceIndex,
                trace.size(),
                allocs,
                exact,
                segmentEvents + (openingSegment != 0 ? 1 : 0),
                segmentMatched + (openingCallMatched ? 1 : 0),
                releaseRuns,
                0,
                0,
                firstMismatch,
                List.copyOf(notes));
    }
}
