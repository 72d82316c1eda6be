package io.gpumem.trace.replay;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpumem.alloc.Pool;
import io.gpumem.config.AllocatorConfig;
import io.gpumem.engine.RequestStream;
import io.gpumem.engine.RunOutcome;
import io.gpumem.history.BlockInfo;
import io.gpumem.history.BlockState;
import io.gpumem.history.FileKeys;
import io.gpumem.history.Frame;
import io.gpumem.history.MemorySnapshot;
import io.gpumem.history.SegmentInfo;
import io.gpumem.history.TraceAction;
import io.gpumem.history.TraceEntry;
import io.gpumem.policy.PolicySpec;
import io.gpumem.trace.TestTraces;
import io.gpumem.trace.io.PytorchSnapshotReader;
import io.gpumem.trace.io.TraceSnapshot;
import io.gpumem.trace.window.RecordedConfig;
import io.gpumem.trace.window.WindowRebuilder;
import io.gpumem.trace.window.WindowStart;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

class WhatIfReplayTest {

    static WhatIfReplay replay(String name) {
        TraceSnapshot s = new PytorchSnapshotReader().read(TestTraces.file(name));
        AllocatorConfig c = RecordedConfig.of(s);
        WindowStart start = new WindowRebuilder(c).rebuild(s, 0);
        return new WhatIfReplay(s, 0, start);
    }

    @ParameterizedTest
    @ValueSource(
            strings = {
                "tiny-forward.pickle",
                "lm2.7b-train-step.pickle",
                "llama-offload-10-streams.pickle",
                "lm-medium-train-ctx128.pickle",
                "nca-train-empty-cache.pickle",
                "gnn-train-expandable-oom.pickle"
            })
    void recordedConfigReproducesTheTracesOwnPeakReserved(String name) {
        WhatIfReplay r = replay(name);
        RunOutcome row = r.evaluate(RecordedConfig.of(r.snapshot()), true);
        System.out.println(name + " " + r.recorded() + " -> " + row);
        assertThat(row.peakReserved()).isEqualTo(r.recorded().peakReserved());
        assertThat(row.ooms()).isZero();
        assertThat(row.peakReserved()).isGreaterThanOrEqualTo(row.peakAllocated());
        assertThat(row.minCapacity()).isLessThanOrEqualTo(r.recorded().capacity());
        assertThat(row.minCapacity()).isGreaterThanOrEqualTo(row.peakAllocated() / (2L << 20) * (2L << 20));
    }

    @Test
    void llamaReproducesItsOomRetriesAtTheRecordedCapacity() {
        WhatIfReplay r = replay("llama-offload-10-streams.pickle");
        RunOutcome row = r.evaluate(AllocatorConfig.defaults(), true);
        // 39 release runs in the recording, every one the OOM-retry path (replay-method.md).
        assertThat(row.retries()).isEqualTo(39);
        assertThat(row.deviceFrees()).isEqualTo(579);
        assertThat(row.deviceAllocs()).isEqualTo(584);
    }

    /**
     * A 60 MiB block in a 60 MiB segment, then a 40 MiB request that failed with 20 MiB free on the device (so 80 MiB
     * in all), then the block's free.
     */
    static TraceSnapshot failedRequest() {
        long base = 0x7f0000000000L;
        long mib = 1L << 20;
        List<TraceEntry> trace = List.of(
                TraceEntry.of(TraceAction.SEGMENT_ALLOC, base, 60 * mib, 0),
                TraceEntry.of(TraceAction.ALLOC, base, 60 * mib, 0),
                new TraceEntry(
                        TraceAction.OOM,
                        0,
                        40 * mib,
                        0,
                        0,
                        null,
                        20 * mib,
                        FileKeys.of(TraceEntry.SIZE | TraceEntry.STREAM | TraceEntry.DEVICE_FREE)),
                TraceEntry.of(TraceAction.FREE_REQUESTED, base, 60 * mib, 0),
                TraceEntry.of(TraceAction.FREE_COMPLETED, base, 60 * mib, 0));
        SegmentInfo end = SegmentInfo.ofBlocks(
                0, base, 0, Pool.LARGE, false, List.of(BlockInfo.of(base, 60 * mib, 0, BlockState.INACTIVE)));
        return HandWindows.snapshot(List.of(end), List.of(trace), Map.of());
    }

    @Test
    void aRequestTheRecordingSawFailIsAskedAgainByTheRunsOnly() {
        long mib = 1L << 20;
        WhatIfReplay r = HandWindows.replay(failedRequest(), 0);
        assertThat(r.recorded().capacity()).as("60 MiB reserved + 20 MiB free").isEqualTo(80 * mib);

        // What the recording held: one block, its alloc and free. What the runs play: the failed request between.
        assertThat(r.stream().length()).isEqualTo(2);
        RequestStream played = r.playedStream();
        assertThat(played.length()).isEqualTo(4);
        assertThat(played.op(1)).isEqualTo(RequestStream.ALLOC);
        assertThat(played.size(1)).isEqualTo(40 * mib);
        assertThat(played.entry(1)).isEqualTo(2);
        assertThat(played.op(2)).as("freed at once when served").isEqualTo(RequestStream.FREE);
        assertThat(played.slot(2)).isEqualTo(played.slot(1));

        // At the recorded capacity the recorded configuration fails it again; 60 + 40 MiB serve it.
        RunOutcome recordedRow = r.evaluate(AllocatorConfig.defaults(), true);
        assertThat(recordedRow.ooms()).isEqualTo(1);
        assertThat(recordedRow.peakReserved()).isEqualTo(60 * mib);
        assertThat(recordedRow.minCapacity()).isEqualTo(100 * mib);
        RunOutcome served = r.evaluate(AllocatorConfig.defaults(), true, 100 * mib);
        assertThat(served.ooms()).isZero();
        assertThat(served.peakAllocated()).isEqualTo(100 * mib);

        // A run to the first failure stops at it; the recorded requests' state at the OOM entry never saw it.
        RunOutcome stopped = r.playKeepingState(AllocatorConfig.defaults(), 80 * mib);
        assertThat(played.entry(stopped.failedOp())).isEqualTo(2);
        RunOutcome state = r.playRequestsThrough(AllocatorConfig.defaults(), 1L << 40, 2);
        assertThat(state.ooms()).isZero();
        assertThat(state.allocator().snapshot().segments())
                .singleElement()
                .satisfies(seg -> assertThat(seg.totalSize()).isEqualTo(60 * mib));
    }

    @Test
    void theAskedRequestCarriesItsOomEntrysStackAndTimeAndAnOomWithoutASizeIsNotAsked() {
        long mib = 1L << 20;
        List<Frame> where = List.of(new Frame("train.py", 42, "forward"));
        TraceSnapshot recorded = failedRequest();
        List<TraceEntry> trace = new java.util.ArrayList<>(recorded.traceOf(0));
        TraceEntry oom = trace.get(2);
        trace.set(
                2,
                new TraceEntry(
                        TraceAction.OOM,
                        0,
                        oom.size(),
                        0,
                        777,
                        where,
                        oom.deviceFree(),
                        FileKeys.of(
                                TraceEntry.SIZE | TraceEntry.STREAM | TraceEntry.TIME_US | TraceEntry.DEVICE_FREE)));
        WhatIfReplay r = HandWindows.replay(HandWindows.snapshot(recorded.segments(), List.of(trace), Map.of()), 0);
        // failed again, the model's own oom entry carries the recorded request's stack and time
        MemorySnapshot failed = r.playKeepingState(AllocatorConfig.defaults(), 80 * mib)
                .allocator()
                .snapshot();
        assertThat(failed.deviceTraces().getFirst())
                .filteredOn(e -> e.action() == TraceAction.OOM)
                .singleElement()
                .satisfies(e -> {
                    assertThat(e.frames()).isEqualTo(where);
                    assertThat(e.timeUs()).isEqualTo(777);
                });
        // served, its alloc and free do
        MemorySnapshot served = r.playKeepingState(AllocatorConfig.defaults(), 100 * mib)
                .allocator()
                .snapshot();
        assertThat(served.deviceTraces().getFirst())
                .filteredOn(e -> e.size() == 40 * mib
                        && (e.action() == TraceAction.ALLOC || e.action() == TraceAction.FREE_REQUESTED))
                .hasSize(2)
                .allSatisfy(e -> {
                    assertThat(e.frames()).isEqualTo(where);
                    assertThat(e.timeUs()).isEqualTo(777);
                });

        // an oom entry without a size (a file that left it out) asks nothing
        trace.set(2, TraceEntry.of(TraceAction.OOM, 0, 0, 0));
        WhatIfReplay sizeless =
                HandWindows.replay(HandWindows.snapshot(recorded.segments(), List.of(trace), Map.of()), 0);
        assertThat(sizeless.playedStream().length()).isEqualTo(sizeless.stream().length());
    }

    @Test
    void theSteadyStateAndItsCapacityLeaveTheFailedRequestOut() {
        long mib = 1L << 20;
        TraceSnapshot loop = HandWindows.loop(4, 4);
        List<TraceEntry> trace = new java.util.ArrayList<>(loop.traceOf(0));
        trace.add(TraceEntry.of(TraceAction.OOM, 0, 100 * mib, 0));
        WhatIfReplay r = HandWindows.replay(HandWindows.snapshot(loop.segments(), List.of(trace), Map.of()), 0)
                .startMode(StartMode.STEADY);
        assertThat(r.steady()).isTrue();
        assertThat(r.steadyPeakReserved(AllocatorConfig.defaults())).isEqualTo(20 * mib);
        assertThat(r.recordedCapacity(AllocatorConfig.defaults())).isEqualTo(20 * mib);
        assertThat(r.evaluate(AllocatorConfig.defaults(), true, 20 * mib).ooms())
                .as("the failed request, asked in the steady state's measured pass")
                .isPositive();
    }

    @Test
    void parallelEvaluationGivesTheSequentialRowsInConfigurationOrder() {
        WhatIfReplay r = replay("tiny-forward.pickle");
        java.util.List<AllocatorConfig> configs = java.util.List.of(
                RecordedConfig.of(r.snapshot()),
                AllocatorConfig.parse("expandable_segments:True"),
                AllocatorConfig.parse("max_split_size_mb:21"),
                AllocatorConfig.parse("roundup_power2_divisions:4"));
        long capacity = r.recorded().capacity();
        java.util.List<RunOutcome> sequential = new java.util.ArrayList<>();
        for (int i = 0; i < configs.size(); i++) {
            sequential.add(r.evaluate(configs.get(i), i == 0, capacity));
        }
        java.util.List<Integer> progress = new java.util.ArrayList<>();
        java.util.List<RunOutcome> parallel = r.evaluateAll(configs, capacity, 3, progress::add);
        // every field but the measured time per pair, which differs from run to run
        for (int i = 0; i < configs.size(); i++) {
            assertThat(parallel.get(i))
                    .usingRecursiveComparison()
                    .ignoringFields("v.nsPerPair")
                    .isEqualTo(sequential.get(i));
        }
        assertThat(parallel.get(0).recorded()).isTrue();
        assertThat(parallel.subList(1, 4)).noneMatch(RunOutcome::recorded);
        assertThat(progress).containsExactly(1, 2, 3, 4);
    }

    /**
     * Worked by hand from the spec on a 100 MiB device: a (60 MiB) is freed and cached; b (30 MiB) splits its
     * block; c (60 MiB) finds no free block, and the 60 MiB segment holding b cannot be released, so c needs a
     * second segment: 120 MiB, an OOM at 100 MiB. With expandable segments c grows the segment from the free
     * 30 MiB tail by two 20 MiB pages: 100 MiB, no OOM.
     */
    @Test
    void scriptWhatIfMatchesTheSpecByHand(@org.junit.jupiter.api.io.TempDir java.nio.file.Path dir) throws Exception {
        java.nio.file.Path f = dir.resolve("job.ops");
        java.nio.file.Files.writeString(f, """
                device capacity=100MiB
                alloc a 60MiB
                free a
                alloc b 30MiB
                alloc c 60MiB
                free b
                free c
                """);
        TraceSnapshot s = io.gpumem.trace.io.TraceReaders.read(f);
        AllocatorConfig recordedConfig = RecordedConfig.of(s);
        WhatIfReplay r = new WhatIfReplay(s, 0, new WindowRebuilder(recordedConfig).rebuild(s, 0));
        long capacity = r.recordedCapacity(recordedConfig);
        assertThat(capacity).isEqualTo(100L << 20);
        RunOutcome defaults = r.evaluate(recordedConfig, true, capacity);
        assertThat(defaults.ooms()).isEqualTo(1);
        assertThat(defaults.retries()).isEqualTo(1);
        assertThat(defaults.minCapacity()).isEqualTo(120L << 20);
        RunOutcome expandable = r.evaluate(AllocatorConfig.parse("expandable_segments:True"), false, capacity);
        assertThat(expandable.ooms()).isZero();
        assertThat(expandable.peakReserved()).isEqualTo(100L << 20);
        assertThat(expandable.minCapacity()).isEqualTo(100L << 20);
    }

    @ParameterizedTest
    @ValueSource(
            strings = {
                "expandable_segments:True",
                "max_split_size_mb:128",
                "roundup_power2_divisions:4",
                "expandable_segments:True,max_split_size_mb:128"
            })
    void tenStreamTraceRunsUnderEveryConfig(String conf) {
        // Ten recorded stream handles, none created on the simulated device: the replay must map them.
        WhatIfReplay r = replay("llama-offload-10-streams.pickle");
        RunOutcome row = r.evaluate(AllocatorConfig.parse(conf), false);
        System.out.println("llama " + conf + " -> " + row);
        assertThat(row.peakReserved()).isGreaterThanOrEqualTo(row.peakAllocated());
        assertThat(row.minCapacity()).isGreaterThanOrEqualTo(row.peakAllocated() / (2L << 20) * (2L << 20));
    }

    @Test
    void alternativeConfigsKeepReservedAboveAllocated() {
        WhatIfReplay r = replay("lm2.7b-train-step.pickle");
        for (String conf : new String[] {"expandable_segments:True", "max_split_size_mb:128"}) {
            AllocatorConfig c = AllocatorConfig.defaults().toBuilder()
                    .raw(conf)
                    .expandableSegments(conf.startsWith("expandable"))
                    .maxSplitSize(conf.startsWith("max_split") ? 128L << 20 : AllocatorConfig.UNLIMITED)
                    .build();
            RunOutcome row = r.evaluate(c, false);
            System.out.println(conf + " -> " + row);
            assertThat(row.peakReserved()).isGreaterThanOrEqualTo(row.peakAllocated());
            assertThat(row.minCapacity()).isGreaterThanOrEqualTo(row.peakAllocated() / (2L << 20) * (2L << 20));
        }
    }

    /** Two 30 MiB requests live together: 60 MiB reserved at the peak, so a 40 MiB device fails the second. */
    private static final String TWO_BLOCKS = "alloc a 30MiB\nalloc b 30MiB\nfree a\nfree b\n";

    @Test
    void oneRunGivesItsPeakReservedOrMinusOneWhenARequestFails() {
        WhatIfReplay r = HandWindows.replay(HandWindows.script(TWO_BLOCKS), 0);
        AllocatorConfig defaults = AllocatorConfig.defaults();
        assertThat(r.runOnce(defaults, 64L << 20)).isEqualTo(60L << 20);
        assertThat(r.runOnce(defaults, 60L << 20)).isEqualTo(60L << 20);
        assertThat(r.runOnce(defaults, 40L << 20)).isEqualTo(-1);
        PolicySpec stitch = PolicySpec.parse("stitch");
        assertThat(r.runsWithoutOom(stitch, 64L << 20)).isTrue();
        assertThat(r.runsWithoutOom(stitch, 40L << 20)).isFalse();
    }

    /** The policy's own snapshot after the window; none when even the start's live blocks (15 MiB) do not fit. */
    @Test
    void aPolicySnapshotShowsWhatThePolicyLeftAndNothingWhenTheStartDoesNotFit() {
        WhatIfReplay r = HandWindows.replay(HandWindows.loop(10, 10), 0);
        PolicySpec stitch = PolicySpec.parse("stitch");
        MemorySnapshot after = r.policySnapshot(stitch, 40L << 20);
        assertThat(after).isNotNull();
        assertThat(after.segments()).hasSize(1);
        assertThat(after.segments().getFirst().allocatedSize()).isEqualTo(10 * HandWindows.BLOCK);
        assertThat(after.segments().getFirst().totalSize()).isEqualTo(16L << 20);
        assertThat(r.policySnapshot(stitch, 4L << 20)).isNull();
    }

    /** A replay of another device than the first plays that device's trace and says which it is. */
    @Test
    void aReplayOfTheSecondDeviceReplaysItsTrace() {
        long base = 0x7f0000000000L;
        java.util.List<TraceEntry> second = java.util.List.of(
                TraceEntry.of(TraceAction.ALLOC, base, 30L << 20, 0),
                TraceEntry.of(TraceAction.ALLOC, base + (30L << 20), 1L << 20, 0),
                TraceEntry.of(TraceAction.FREE_REQUESTED, base, 30L << 20, 0));
        TraceSnapshot s = HandWindows.snapshot(
                java.util.List.of(), java.util.List.of(java.util.List.of(), second), java.util.Map.of());
        WhatIfReplay r = HandWindows.replay(s, 1);
        assertThat(r.device()).isEqualTo(1);
        assertThat(r.stream().allocs()).isEqualTo(2);
    }

    /**
     * The test hook that lowers the checkpoint gain of the capacity search reaches the search: with a checkpoint at
     * every probe, its probes replay fewer entries (and give the same row).
     */
    @Test
    void aLowerCheckpointGainMakesTheSearchReplayFewerEntries() {
        StringBuilder script = new StringBuilder();
        for (int i = 0; i < 40; i++) {
            script.append("alloc a")
                    .append(i)
                    .append(' ')
                    .append(1 + i * 7 % 13)
                    .append("MiB\n");
            if (i % 3 == 2) {
                script.append("free a").append(i - 1).append('\n');
            }
        }
        TraceSnapshot s = HandWindows.script(script.toString());
        WhatIfReplay plain = HandWindows.replay(s, 0);
        WhatIfReplay everyProbe = HandWindows.replay(s, 0);
        everyProbe.setCheckpointGain(1);
        long capacity = plain.recordedCapacity(RecordedConfig.of(s));
        assertThat(everyProbe.recordedCapacity(RecordedConfig.of(s))).isEqualTo(capacity);
        RunOutcome a = plain.evaluate(AllocatorConfig.defaults(), true, capacity);
        RunOutcome b = everyProbe.evaluate(AllocatorConfig.defaults(), true, capacity);
        assertThat(b).usingRecursiveComparison().ignoringFields("v.nsPerPair").isEqualTo(a);
        assertThat(everyProbe.replayCounts()[0]).isEqualTo(plain.replayCounts()[0]);
        assertThat(everyProbe.replayCounts()[1]).isLessThan(plain.replayCounts()[1]);
    }
}
