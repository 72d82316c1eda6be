package io.gpumem.trace.replay;

import io.gpumem.alloc.CachingAllocator;
import io.gpumem.config.AllocatorConfig;
import io.gpumem.history.BlockInfo;
import io.gpumem.history.MemorySnapshot;
import io.gpumem.history.SegmentInfo;
import io.gpumem.history.TraceEntry;
import io.gpumem.trace.io.TraceSnapshot;
import io.gpumem.trace.window.RecordedConfig;
import io.gpumem.trace.window.WindowRebuilder;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * Oracle replay ({@code gpumem replay --check}): replays each device trace of a snapshot through gpumem's
 * {@link CachingAllocator} on an {@link OracleDevice}, and measures how many of the recorded decisions the
 * allocator reproduces.
 *
 * <p>Per device: the window's start state is rebuilt ({@link WindowRebuilder}) and loaded; then, in trace order,
 * <ul>
 *   <li>{@code segment_alloc} / {@code segment_map} entries only queue their address on the device (the model
 *       decides whether it needs a segment; the trace supplies only what the driver returned);</li>
 *   <li>{@code alloc} runs {@code malloc(size, stream)} and compares the address with the recorded one; the
 *       segment events the model emitted meanwhile (seen through a trace tracker) are compared with the recorded
 *       ones in order, by action, address and size;</li>
 *   <li>{@code free_completed} runs {@code free} (a trace without completions frees at {@code free_requested});
 *       addresses of blocks the model placed elsewhere are translated;</li>
 *   <li>a run of {@code segment_free} / {@code segment_unmap} entries is replayed as {@code empty_cache()} (the
 *       OOM-retry path releases exactly what {@code empty_cache()} does) and the model's releases are compared
 *       with the run;</li>
 *   <li>{@code oom}, {@code snapshot} and unknown actions change nothing (a failed request allocates nothing).</li>
 * </ul>
 * At the end the model's segments are compared block by block with the snapshot's end state. The replay never
 * forces a recorded decision on the model: after a mismatch later placements may drift, which the counts show.
 * Each device trace is replayed by a {@link DeviceReplay}; with {@link #writeSnapshot} on, the replay also builds
 * the snapshot it would write ({@link #replayedSnapshot()}, see {@link ReplayedSnapshot}).
 *
 * <p>Not thread-safe; one replay per instance at a time.
 */
public final class OracleReplay {

    private final long totalMemory;
    private ProgressListener progress = ProgressListener.NONE;
    private boolean writeSnapshot;
    private TraceSnapshot replayed;

    public OracleReplay() {
        this(OracleDevice.DEFAULT_TOTAL_MEMORY);
    }

    /** @param totalMemory device memory assumed for sizing expandable reservations */
    public OracleReplay(long totalMemory) {
        this.totalMemory = totalMemory;
    }

    public OracleReplay progress(ProgressListener listener) {
        this.progress = listener;
        return this;
    }

    /** Also builds the snapshot the replay writes, so that {@link #replayedSnapshot()} can be written out. */
    public OracleReplay writeSnapshot(boolean on) {
        this.writeSnapshot = on;
        return this;
    }

    /**
     * The snapshot of the last {@link #check} with {@link #writeSnapshot} on: the model's end state and traces,
     * with everything the recording had (see {@link ReplayedSnapshot}); {@code null} before.
     */
    public TraceSnapshot replayedSnapshot() {
        return replayed;
    }

    /** Replays every device trace of {@code snapshot} under its recorded configuration. */
    public FidelityReport check(TraceSnapshot snapshot) {
        return check(snapshot, RecordedConfig.of(snapshot), true);
    }

    /** Replays every device trace of {@code snapshot} under {@code config} (a what-if). */
    public FidelityReport check(TraceSnapshot snapshot, AllocatorConfig config) {
        return check(snapshot, config, false);
    }

    private FidelityReport check(TraceSnapshot snapshot, AllocatorConfig config, boolean recordedConfig) {
        replayed = null;
        List<String> notes = new ArrayList<>();
        if (!snapshot.addressesRecorded()) {
            notes.add("the file records no addresses (" + snapshot.format() + "): placement cannot be checked");
            return new FidelityReport(snapshot.source(), List.of(), notes);
        }
        long total = snapshot.entryCount();
        long done = 0;
        List<DeviceFidelity> devices = new ArrayList<>();
        List<MemorySnapshot> models = new ArrayList<>();
        List<List<TraceEntry>> traces = new ArrayList<>();
        for (int d = 0; d < snapshot.deviceTraces().size(); d++) {
            List<TraceEntry> trace = snapshot.traceOf(d);
            if (trace.isEmpty()) {
                models.add(null);
                traces.add(null);
                continue;
            }
            DeviceReplay replay = new DeviceReplay(snapshot, d, config, totalMemory, writeSnapshot);
            DeviceFidelity fidelity = replay.run(progress, done, total);
            MemorySnapshot model = replay.modelSnapshot();
            devices.add(withEndState(fidelity, EndState.compare(snapshot.segmentsOf(d), model)));
            models.add(model);
            traces.add(writeSnapshot ? replay.writtenTrace() : null);
            done += trace.size();
        }
        if (devices.stream().allMatch(f -> f.allocs() == 0)) {
            notes.add("no alloc entries: the file holds state only (a snapshot without history), nothing to replay");
        }
        progress.progress(total, total);
        if (writeSnapshot) {
            replayed = ReplayedSnapshot.of(snapshot, models, traces, recordedConfig);
        }
        return new FidelityReport(snapshot.source(), devices, notes);
    }

    private static DeviceFidelity withEndState(DeviceFidelity f, EndState end) {
        return new DeviceFidelity(
                f.device(),
                f.entries(),
                f.allocs(),
                f.exact(),
                f.segmentEvents(),
                f.segmentMatched(),
                f.releaseRuns(),
                end.segments(),
                end.identical(),
                f.firstMismatch(),
                f.notes());
    }

    /**
     * How many of a device's recorded end-state segments the model holds identically (address, size, state), out
     * of the recorded ones plus those the model holds where the recording has none.
     */
    record EndState(long segments, long identical) {

        static EndState compare(List<SegmentInfo> recorded, MemorySnapshot model) {
            Map<Long, SegmentInfo> byAddress = new HashMap<>();
            for (SegmentInfo s : model.segments()) {
                byAddress.put(s.address(), s);
            }
            long same = 0;
            long modelOnly = model.segments().size();
            for (SegmentInfo r : recorded) {
                SegmentInfo m = byAddress.get(r.address());
                if (m != null) {
                    modelOnly--;
                }
                if (sameBlocks(r, m)) {
                    same++;
                }
            }
            return new EndState(recorded.size() + modelOnly, same);
        }

        private static boolean sameBlocks(SegmentInfo r, SegmentInfo m) {
            if (m == null
                    || m.totalSize() != r.totalSize()
                    || m.blocks().size() != r.blocks().size()) {
                return false;
            }
            for (int i = 0; i < r.blocks().size(); i++) {
                BlockInfo rb = r.blocks().get(i);
                BlockInfo mb = m.blocks().get(i);
                if (rb.address() != mb.address() || rb.size() != mb.size() || rb.state() != mb.state()) {
                    return false;
                }
            }
            return true;
        }
    }
}
