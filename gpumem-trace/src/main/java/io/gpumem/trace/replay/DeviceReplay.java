package io.gpumem.trace.replay;

import io.gpumem.alloc.CachingAllocator;
import io.gpumem.config.AllocatorConfig;
import io.gpumem.engine.StartStateLoader;
import io.gpumem.history.Frame;
import io.gpumem.history.HistoryOptions;
import io.gpumem.history.MemorySnapshot;
import io.gpumem.history.TraceAction;
import io.gpumem.history.TraceEntry;
import io.gpumem.history.TraceListener;
import io.gpumem.oom.OutOfMemoryException;
import io.gpumem.trace.io.TraceSnapshot;
import io.gpumem.trace.window.WindowRebuilder;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.function.Consumer;
import java.util.function.LongUnaryOperator;

/**
 * One device trace replayed by {@link OracleReplay}: the model allocator on its {@link OracleDevice}, the
 * fidelity counters, and (when asked) the trace the replay writes ({@link ReplayedTrace}).
 *
 * <p>Every entry the model emits is seen through a trace tracker and held in {@link #pending} until the recorded
 * entry that caused it has been replayed; then its driver calls are compared, in order, with the recorded
 * {@code segment_*} entries that preceded the request ({@link #expected}), and everything is handed to the
 * written trace. Without a written trace only the driver calls are kept, as plain fields seen through a
 * {@link TraceListener} ({@link #eventAction}, ...): nothing is built or boxed per replayed entry. The model's clock reads the recorded {@code time_us} of the entry being replayed, and its
 * context supplier the entry's recorded frames, so the blocks and segments it creates carry the recording's
 * stacks. Single use, not thread-safe.
 */
final class DeviceReplay {

    private final int deviceIndex;
    private final List<TraceEntry> trace;
    private final boolean hasCompletions;
    private final OracleDevice device;
    private final CachingAllocator allocator;
    private final ReplayedTrace written;
    /** Recorded address → model address of blocks the model placed elsewhere. */
    private final Map<Long, Long> moved = new HashMap<>();
    /** Indices of recorded driver-call entries not yet compared with the model's ({@code expectedCount} of them). */
    private int[] expected = new int[16];

    private int expectedCount;
    /** Entries the model emitted since the last comparison, oldest first (when writing a trace). */
    private final List<TraceEntry> pending = new ArrayList<>();
    /** The driver calls among them, as plain fields (when not writing): {@code eventCount} of them. */
    private TraceAction[] eventAction = new TraceAction[16];

    private long[] eventAddr = new long[16];
    private long[] eventSize = new long[16];
    private int eventCount;
    private final List<String> notes = new ArrayList<>();
    private final Consumer<TraceEntry> tracker = pending::add;
    private final TraceListener listener = this::driverCall;

    private TraceEntry current;
    private long allocs;
    private long exact;
    private long segmentEvents;
    private long segmentMatched;
    private long releaseRuns;
    private long unknownFrees;
    private long oomEntries;
    private Mismatch firstMismatch;

    /**
     * @param write whether to build the trace the replay writes ({@link #writtenTrace()})
     */
    DeviceReplay(TraceSnapshot snapshot, int deviceIndex, AllocatorConfig config, long totalMemory, boolean write) {
        this.deviceIndex = deviceIndex;
        this.trace = snapshot.traceOf(deviceIndex);
        this.hasCompletions = trace.stream().anyMatch(e -> e.action() == TraceAction.FREE_COMPLETED);
        this.device = new OracleDevice(totalMemory);
        this.allocator = new CachingAllocator(device, config);
        this.written = write ? new ReplayedTrace(hasCompletions) : null;
        StartStateLoader.load(
                allocator.internals(),
                device,
                new WindowRebuilder(config).rebuild(snapshot, deviceIndex).segments(),
                device,
                false,
                LongUnaryOperator.identity());
        if (write) {
            // Live blocks and segments keep the stack of the request that made them; the trace is the tracker's.
            allocator.recordHistory(new HistoryOptions(HistoryOptions.Enabled.STATE, HistoryOptions.Context.STATE, 1));
            allocator.setContextSupplier(this::currentFrames);
        }
        allocator.internals().setClock(() -> current == null ? 0 : current.timeUs());
        if (write) {
            allocator.internals().attachTraceTracker(tracker);
        } else {
            allocator.internals().attachTraceListener(listener);
        }
    }

    private void driverCall(TraceAction action, long addr, long size, long stream) {
        if (!action.isSegmentEvent()) {
            return;
        }
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
        return current == null || current.frames() == null ? List.of() : current.frames();
    }

    /** Replays the whole trace, reporting progress every 16k entries. */
    DeviceFidelity run(ProgressListener progress, long doneBefore, long total) {
        boolean inRelease = false;
        for (int i = 0; i < trace.size(); i++) {
            if ((i & 0x3fff) == 0 && i > 0) {
                progress.progress(doneBefore + i, total);
            }
            current = trace.get(i);
            boolean release = isRelease(current.action());
            if (release != inRelease) {
                compareDriverCalls(i);
                if (release) {
                    // The OOM-retry path releases exactly what empty_cache() does.
                    allocator.emptyCache();
                    releaseRuns++;
                }
                inRelease = release;
            }
            if (!replay(i)) {
                break;
            }
        }
        compareDriverCalls(trace.size());
        if (written != null) {
            allocator.internals().detachTraceTracker(tracker);
        } else {
            allocator.internals().detachTraceListener(listener);
        }
        return fidelity();
    }

    private static boolean isRelease(TraceAction a) {
        return a == TraceAction.SEGMENT_FREE || a == TraceAction.SEGMENT_UNMAP;
    }

    /** Replays entry {@code i}; false when the model cannot go on. */
    private boolean replay(int i) {
        TraceEntry e = trace.get(i);
        switch (e.action()) {
            case SEGMENT_ALLOC -> {
                expect(i);
                device.offerMalloc(e.addr());
            }
            case SEGMENT_MAP -> {
                expect(i);
                device.offerMap(e.addr());
            }
            case SEGMENT_FREE, SEGMENT_UNMAP -> expect(i);
            case ALLOC -> {
                return alloc(i, e);
            }
            case FREE_REQUESTED, FREE_COMPLETED -> free(i, e);
            case OOM -> {
                oomEntries++;
                passThrough(e);
            }
            default -> passThrough(e);
        }
        return true;
    }

    private void expect(int index) {
        if (expectedCount == expected.length) {
            expected = Arrays.copyOf(expected, expectedCount * 2);
        }
        expected[expectedCount++] = index;
        segmentEvents++;
    }

    private boolean alloc(int i, TraceEntry e) {
        allocs++;
        long got;
        try {
            got = allocator.malloc(e.size(), e.stream());
        } catch (OutOfMemoryException ex) {
            mismatch(i, "alloc", hex(e.addr()), "out of memory");
            device.clearOffers();
            compareDriverCalls(i);
            return true;
        } catch (IllegalStateException ex) {
            mismatch(i, "alloc", hex(e.addr()), "error: " + ex.getMessage());
            notes.add("replay of this device stopped at entry " + i + ": " + ex.getMessage());
            return false;
        }
        device.clearOffers();
        if (got == e.addr()) {
            exact++;
            if (!moved.isEmpty()) {
                moved.remove(e.addr());
            }
        } else {
            moved.put(e.addr(), got);
            mismatch(i, "alloc", hex(e.addr()), hex(got));
        }
        compareDriverCalls(i);
        return true;
    }

    /**
     * Frees at {@code free_completed} (at {@code free_requested} in a trace without completions); a request
     * whose completion comes later is written where it was recorded, at the block's model address.
     */
    private void free(int i, TraceEntry e) {
        boolean frees = e.action() == TraceAction.FREE_COMPLETED || !hasCompletions;
        if (!frees) {
            if (written != null) {
                written.addRecorded(e, translated(e.addr()));
            }
            return;
        }
        Long m = moved.isEmpty() ? null : moved.remove(e.addr());
        try {
            allocator.free(m != null ? m : e.addr());
        } catch (IllegalArgumentException ex) {
            if (unknownFrees++ == 0) {
                notes.add("entry " + i + ": free of " + hex(e.addr()) + " that the model does not hold ("
                        + ex.getMessage() + ")");
            }
        }
        handOver(e);
    }

    private long translated(long recorded) {
        Long m = moved.get(recorded);
        return m == null ? recorded : m;
    }

    /** Entries the allocator does not act on ({@code oom}, {@code snapshot}, annotations) are written as recorded. */
    private void passThrough(TraceEntry e) {
        if (written != null) {
            written.addRecorded(e, e.addr());
        }
    }

    /** Hands the model's entries that are not driver calls, emitted while serving {@code cause}, to the writer. */
    private void handOver(TraceEntry cause) {
        if (written != null) {
            for (TraceEntry m : pending) {
                written.addModel(m, cause);
            }
        }
        pending.clear();
        eventCount = 0;
    }

    /**
     * Compares the model's driver calls since the last comparison with the recorded ones, in order, by action,
     * address and size, and hands every pending entry to the writer: a matched driver call as recorded, any other
     * as the model made it, attributed to the entry being replayed.
     */
    private void compareDriverCalls(int at) {
        if (written != null) {
            compareAndWrite(at);
            return;
        }
        int k = 0;
        for (int j = 0; j < eventCount; j++, k++) {
            compareOne(k, at, eventAction[j], eventAddr[j], eventSize[j]);
        }
        missingCalls(k);
    }

    /** {@link #compareDriverCalls} when writing a trace: every pending entry is also handed to the writer. */
    private void compareAndWrite(int at) {
        int k = 0;
        for (TraceEntry m : pending) {
            if (!m.action().isSegmentEvent()) {
                written.addModel(m, current);
                continue;
            }
            TraceEntry exp = compareOne(k, at, m.action(), m.addr(), m.size());
            if (exp != null) {
                written.addRecorded(exp, exp.addr());
            } else {
                written.addModel(m, current);
            }
            k++;
        }
        missingCalls(k);
    }

    /**
     * Compares the model's {@code k}-th driver call since the last comparison with the {@code k}-th recorded
     * one; returns the recorded entry when they match, else null (the mismatch is noted).
     */
    private TraceEntry compareOne(int k, int at, TraceAction action, long addr, long size) {
        TraceEntry exp = k < expectedCount ? trace.get(expected[k]) : null;
        if (exp != null && exp.action() == action && exp.addr() == addr && exp.size() == size) {
            segmentMatched++;
            return exp;
        }
        mismatch(
                exp != null ? expected[k] : at,
                "segment",
                exp == null ? "no driver call" : describe(exp.action(), exp.addr(), exp.size()),
                describe(action, addr, size));
        return null;
    }

    /** Notes the recorded driver calls from the {@code k}-th on as not made, and starts the next comparison. */
    private void missingCalls(int k) {
        for (; k < expectedCount; k++) {
            TraceEntry exp = trace.get(expected[k]);
            mismatch(expected[k], "segment", describe(exp.action(), exp.addr(), exp.size()), "no driver call");
        }
        expectedCount = 0;
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

    /** The model's end state (call after {@link #run}). */
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
        if (oomEntries > 0) {
            notes.add(oomEntries + " oom entr" + (oomEntries == 1 ? "y" : "ies")
                    + ": the request failed in the recording and allocates nothing in the replay");
        }
        if (device.syntheticAddresses() > 0) {
            notes.add(device.syntheticAddresses() + " driver allocations the recording does not have");
        }
        return new DeviceFidelity(
                deviceIndex,
                trace.size(),
                allocs,
                exact,
                segmentEvents,
                segmentMatched,
                releaseRuns,
                0,
                0,
                firstMismatch,
                List.copyOf(notes));
    }
}
