package io.gpumem.trace.replay;

import io.gpumem.alloc.AddressTable;
import io.gpumem.alloc.AllocatorInternals;
import io.gpumem.alloc.CachingAllocator;
import io.gpumem.alloc.Pool;
import io.gpumem.config.AllocatorConfig;
import io.gpumem.history.BlockInfo;
import io.gpumem.history.BlockState;
import io.gpumem.history.MemorySnapshot;
import io.gpumem.history.SegmentInfo;
import io.gpumem.history.TraceEntry;
import io.gpumem.trace.io.TraceSnapshot;
import io.gpumem.trace.window.RecordedConfig;
import java.util.ArrayList;
import java.util.List;
import org.jspecify.annotations.Nullable;

/**
 * Oracle replay ({@code gpumem replay --check}): replays each device trace of a snapshot through gpumem's
 * {@link CachingAllocator} on an {@link OracleDevice}, and measures how many of the recorded decisions the
 * allocator reproduces.
 *
 * <p>Per device, prepared once ({@link #prepare}, an {@link OracleWindow}): the window's start state is rebuilt
 * ({@link io.gpumem.trace.window.WindowRebuilder}) and the window compiled into the engine's {@link
 * io.gpumem.engine.RequestStream}, the one stream every what-if plays, with the recording's decisions beside it
 * ({@link RecordedDecisions}). Then each check loads the start state and plays the stream:
 * <ul>
 *   <li>an alloc op offers the device the addresses of the {@code segment_alloc} / {@code segment_map} entries
 *       recorded before it (the model decides whether it needs a segment; the trace supplies only what the driver
 *       returned), runs {@code malloc(size, stream)} and compares the address with the recorded one; the driver
 *       calls the model made meanwhile (seen through a trace listener) are compared with the recorded ones in
 *       order, by action, address and size;</li>
 *   <li>a free op frees its block where the model put it, at {@code free_completed} ({@code free_requested} in a
 *       trace without completions);</li>
 *   <li>a run of {@code segment_free} / {@code segment_unmap} entries is one {@code empty_cache()} op (the
 *       OOM-retry path releases exactly what {@code empty_cache()} does), and the model's releases are compared
 *       with the run;</li>
 *   <li>{@code oom}, {@code snapshot} and unknown actions change nothing (a failed request allocates nothing).</li>
 * </ul>
 * At the end the model's segments are compared block by block with the snapshot's end state. The replay never
 * forces a recorded decision on the model: after a mismatch later placements may drift, which the counts show.
 * Each device window is played by a {@link DeviceReplay}; with {@link #writeSnapshot} on, the replay also builds
 * the snapshot it would write ({@link #replayedSnapshot()}, see {@link ReplayedSnapshot}), from a start whose free
 * blocks carry the stale requested sizes the recorded end state shows for them where the rebuild cannot follow
 * their objects ({@link FreeBlockMarks#withRecordedStaleSizes}: windows that unmap pages of expandable segments).
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
        return check(prepare(snapshot));
    }

    /** Replays every device trace of {@code snapshot} under {@code config} (a what-if). */
    public FidelityReport check(TraceSnapshot snapshot, AllocatorConfig config) {
        return check(prepare(snapshot, config));
    }

    /** Rebuilds and compiles every device window of {@code snapshot} for replays under its recorded configuration. */
    public static Windows prepare(TraceSnapshot snapshot) {
        return new Windows(snapshot, RecordedConfig.of(snapshot), true);
    }

    /** Rebuilds and compiles every device window of {@code snapshot} for replays under {@code config}. */
    public static Windows prepare(TraceSnapshot snapshot, AllocatorConfig config) {
        return new Windows(snapshot, config, false);
    }

    /**
     * A snapshot's device windows prepared once for oracle replays (start states rebuilt, requests compiled into
     * the engine's stream with the recording's decisions): what {@link #check(Windows)} plays, as often as asked.
     * Read-only; one {@code Windows} may serve replays on several threads.
     */
    public static final class Windows {
        private final TraceSnapshot snapshot;
        private final AllocatorConfig config;
        private final boolean recordedConfig;
        /** Per device trace, its prepared window; null for an empty trace or a file without addresses. */
        private final List<@Nullable OracleWindow> windows = new ArrayList<>();

        private Windows(TraceSnapshot snapshot, AllocatorConfig config, boolean recordedConfig) {
            this.snapshot = snapshot;
            this.config = config;
            this.recordedConfig = recordedConfig;
            for (int d = 0; d < snapshot.deviceTraces().size(); d++) {
                boolean replayable =
                        snapshot.addressesRecorded() && !snapshot.traceOf(d).isEmpty();
                windows.add(replayable ? OracleWindow.prepare(snapshot, d, config) : null);
            }
        }
    }

    /** Replays every prepared device window and compares the model's decisions with the recording's. */
    public FidelityReport check(Windows prepared) {
        replayed = null;
        TraceSnapshot snapshot = prepared.snapshot;
        List<String> notes = new ArrayList<>();
        if (!snapshot.addressesRecorded()) {
            notes.add("the file records no addresses (" + snapshot.format().description()
                    + "): placement cannot be checked");
            return new FidelityReport(snapshot.source(), List.of(), notes);
        }
        long total = snapshot.entryCount();
        long done = 0;
        List<DeviceFidelity> devices = new ArrayList<>();
        List<MemorySnapshot> models = new ArrayList<>();
        List<List<TraceEntry>> traces = new ArrayList<>();
        for (OracleWindow window : prepared.windows) {
            if (window == null) {
                models.add(null);
                traces.add(null);
                continue;
            }
            OracleWindow played = writeSnapshot
                    ? FreeBlockMarks.withRecordedStaleSizes(snapshot, window, prepared.config, totalMemory)
                    : window;
            DeviceReplay replay = new DeviceReplay(played, prepared.config, totalMemory, writeSnapshot);
            DeviceFidelity fidelity = replay.run(progress, done, total);
            EndState end = EndState.compare(snapshot.segmentsOf(window.device()), replay.model());
            devices.add(withEndState(fidelity, end));
            models.add(writeSnapshot ? replay.modelSnapshot() : null);
            traces.add(writeSnapshot ? replay.writtenTrace() : null);
            done += window.trace().size();
        }
        if (devices.stream().allMatch(f -> f.allocs() == 0)) {
            notes.add("no alloc entries: the file holds state only (a snapshot without history), nothing to replay");
        }
        progress.progress(total, total);
        if (writeSnapshot) {
            replayed = ReplayedSnapshot.of(snapshot, models, traces, prepared.recordedConfig);
        }
        return new FidelityReport(snapshot.source(), devices, notes);
    }

    /** {@code f} with the end-state comparison's counts. */
    static DeviceFidelity withEndState(DeviceFidelity f, EndState end) {
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
     * How many of a device's recorded end-state segments the model holds identically (the segment's address,
     * stream, pool and kind; each block's address, size and state), out of the recorded ones plus those the model
     * holds where the recording has none.
     */
    record EndState(long segments, long identical) {

        /** Compares the model's state with the recorded segments as the model reports it, building no snapshot. */
        static EndState compare(List<SegmentInfo> recorded, AllocatorInternals model) {
            Comparison c = new Comparison(recorded);
            model.visitSegments(c);
            return c.result();
        }

        /**
         * Follows the model's segments block by block against the recorded segment at the same address: a
         * segment is identical when it has the recorded stream, pool and kind (expandable or not), every block
         * matches in order (address, size, state) and the recorded total equals the blocks' sum.
         */
        private static final class Comparison implements AllocatorInternals.SegmentVisitor {
            private final AddressTable<SegmentInfo> byAddress;
            private final int recordedCount;
            /** The recorded segment at the current model segment's address; null when none (or none open). */
            private @Nullable SegmentInfo current;
            /** Whether the current model segment still matches {@link #current} block for block. */
            private boolean same;

            private int blocks;
            private long bytes;
            private long modelOnly;
            private long identical;

            Comparison(List<SegmentInfo> recorded) {
                recordedCount = recorded.size();
                byAddress = AddressTable.forObjects(recordedCount);
                for (SegmentInfo r : recorded) {
                    if (r.address() != 0) { // the model never places a segment at 0
                        byAddress.put(r.address(), r);
                    }
                }
            }

            @Override
            public void segment(long address, long stream, Pool pool, boolean expandable) {
                finish();
                SegmentInfo r = byAddress.get(address);
                current = r;
                if (r == null) {
                    modelOnly++;
                }
                same = r != null && r.stream() == stream && r.pool() == pool && r.expandable() == expandable;
                blocks = 0;
                bytes = 0;
            }

            @Override
            public void block(long address, long size, long requestedSize, BlockState state) {
                bytes += size;
                SegmentInfo r = current;
                if (!same || r == null) {
                    return;
                }
                if (blocks == r.blocks().size()) {
                    same = false;
                    return;
                }
                BlockInfo rb = r.blocks().get(blocks++);
                same = rb.address() == address && rb.size() == size && rb.state() == state;
            }

            private void finish() {
                SegmentInfo r = current;
                if (same && r != null && blocks == r.blocks().size() && bytes == r.totalSize()) {
                    identical++;
                }
                current = null;
                same = false;
            }

            EndState result() {
                finish();
                return new EndState(recordedCount + modelOnly, identical);
            }
        }
    }
}
