package io.gpumem.trace.analysis;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpumem.alloc.CachingAllocator;
import io.gpumem.alloc.SizeRules;
import io.gpumem.config.AllocatorConfig;
import io.gpumem.device.SimulatedDevice;
import io.gpumem.engine.RunOutcome;
import io.gpumem.history.TraceAction;
import io.gpumem.history.TraceEntry;
import io.gpumem.oom.OutOfMemoryException;
import io.gpumem.stats.StatKind;
import io.gpumem.trace.io.SourceFormat;
import io.gpumem.trace.io.TraceReaders;
import io.gpumem.trace.io.TraceSnapshot;
import io.gpumem.trace.replay.WhatIfReplay;
import io.gpumem.trace.window.RecordedConfig;
import io.gpumem.trace.window.WindowRebuilder;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;
import java.util.function.Supplier;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * A file that records requests but no allocator state (here an RMM log) is analysed in the state a replay of its
 * requests reaches under the default configuration: held against the caching allocator driven by hand through the
 * same requests, segment by segment and block by block.
 */
class RequestsOnlyStatesTest {

    private static final long MiB = 1L << 20;

    @TempDir
    Path dir;

    /** A seeded RMM log of {@code requests} allocations and frees of mixed sizes, every block freed at the end. */
    private TraceSnapshot rmmLog(long seed, int requests, boolean freeAll) throws IOException {
        SplittableRandom random = new SplittableRandom(seed);
        List<String> lines = new ArrayList<>(List.of("Thread,Time,Action,Pointer,Size,Stream"));
        List<long[]> live = new ArrayList<>();
        long next = 0x7f0000000000L;
        double time = 0;
        for (int i = 0; i < requests; i++) {
            time += 0.001;
            if (!live.isEmpty() && random.nextInt(3) == 0) {
                long[] b = live.remove(random.nextInt(live.size()));
                lines.add(String.format("1,%.3f,free,0x%x,%d,0x0", time, b[0], b[1]));
            } else {
                long size = random.nextInt(4) == 0 ? 1 + random.nextInt(1 << 20) : (1 + random.nextInt(96)) * MiB;
                lines.add(String.format("1,%.3f,allocate,0x%x,%d,0x0", time, next, size));
                live.add(new long[] {next, size});
                next += (size + 4095) & ~4095L;
            }
        }
        while (freeAll && !live.isEmpty()) {
            long[] b = live.removeLast();
            time += 0.001;
            lines.add(String.format("1,%.3f,free,0x%x,%d,0x0", time, b[0], b[1]));
        }
        Path file = dir.resolve("log-" + seed + ".csv");
        Files.write(file, lines);
        TraceSnapshot t = TraceReaders.read(file);
        assertThat(t.format()).isEqualTo(SourceFormat.RMM_LOG);
        return t;
    }

    /**
     * The caching allocator under the defaults driven through entries {@code 0..n} by hand, on a device of
     * {@code capacity}; stops at the first request that fails, returning its entry in {@code failedAt[0]}.
     */
    private static CachingAllocator byHand(List<TraceEntry> trace, int n, long capacity, int[] failedAt) {
        CachingAllocator a = new CachingAllocator(SimulatedDevice.withCapacity(capacity), AllocatorConfig.defaults());
        Map<Long, Long> pointers = new HashMap<>();
        failedAt[0] = -1;
        for (int i = 0; i <= n; i++) {
            TraceEntry e = trace.get(i);
            if (e.action() == TraceAction.ALLOC) {
                try {
                    pointers.put(e.addr(), a.malloc(e.size(), e.stream()));
                } catch (OutOfMemoryException oom) {
                    failedAt[0] = i;
                    return a;
                }
            } else if (e.action() == TraceAction.FREE_COMPLETED) {
                Long p = pointers.remove(e.addr());
                if (p != null) {
                    a.free(p);
                }
            }
        }
        return a;
    }

    /**
     * The analysis at the default moment, no compare runs, the window rebuilt from the file (as a session would make
     * it once).
     */
    private static DeviceAnalysis analyzeByDefault(TraceSnapshot file, long capacity) {
        return DeviceAnalysis.of(
                file, 0, null, capacity, 5, false, () -> TraceStates.window(file, 0), usable -> null, List.of());
    }

    private static List<String> shapeOf(CachingAllocator a) {
        return TraceStatesTest.shape(
                MemoryState.builder().segments(a.snapshot().segments()).build());
    }

    @Test
    void theStateAfterAnEntryIsTheOneTheAllocatorReachesThroughTheSameRequests() throws IOException {
        long seed = System.nanoTime();
        System.out.println("RequestsOnlyStatesTest seed " + seed);
        TraceSnapshot log = rmmLog(seed, 300, false);
        List<TraceEntry> trace = log.traceOf(0);
        int[] failedAt = new int[1];
        for (int n : new int[] {0, trace.size() / 3, trace.size() / 2, trace.size() - 1}) {
            MemoryState replayed = TraceStates.afterEntry(log, 0, n, MemoryState.UNKNOWN);
            assertThat(TraceStatesTest.shape(replayed))
                    .as("seed %d, after entry %d", seed, n)
                    .isEqualTo(shapeOf(byHand(trace, n, TraceStates.UNLIMITED, failedAt)));
            assertThat(failedAt[0]).isNegative();
            assertThat(replayed.oom()).isEmpty();
            assertThat(replayed.label()).contains("replayed under the default configuration to entry #" + n);
        }
    }

    @Test
    void oneWindowPreparedOnceServesEveryMomentAsTheAllocatorDrivenByHand() throws IOException {
        long seed = System.nanoTime();
        System.out.println("RequestsOnlyStatesTest seed " + seed);
        TraceSnapshot log = rmmLog(seed, 200, false);
        List<TraceEntry> trace = log.traceOf(0);
        WhatIfReplay window = TraceStates.window(log, 0);
        int[] asked = {0};
        Supplier<WhatIfReplay> counted = () -> {
            asked[0]++;
            return window;
        };
        SplittableRandom rnd = new SplittableRandom(seed);
        int[] failedAt = new int[1];
        List<Integer> moments = new ArrayList<>(List.of(0, trace.size() - 1));
        for (int i = 0; i < 12; i++) {
            moments.add(rnd.nextInt(trace.size()));
        }
        // right after a free's request and before its completion, the block is still held
        for (int i = 0; i < trace.size(); i++) {
            if (trace.get(i).action() == TraceAction.FREE_REQUESTED) {
                moments.add(i);
                break;
            }
        }
        for (int n : moments) {
            MemoryState replayed = TraceStates.afterEntry(log, 0, n, MemoryState.UNKNOWN, counted);
            assertThat(TraceStatesTest.shape(replayed))
                    .as("seed %d, after entry %d", seed, n)
                    .isEqualTo(shapeOf(byHand(trace, n, TraceStates.UNLIMITED, failedAt)));
        }
        assertThat(asked[0]).as("the prepared window is the one replayed").isEqualTo(moments.size());
    }

    @Test
    void onASmallDeviceTheStateIsTheOneTheFirstFailingRequestMet() throws IOException {
        long seed = System.nanoTime();
        System.out.println("RequestsOnlyStatesTest seed " + seed);
        TraceSnapshot log = rmmLog(seed, 300, false);
        List<TraceEntry> trace = log.traceOf(0);
        int last = trace.size() - 1;
        int[] failedAt = new int[1];
        long peakReserved = byHand(trace, last, TraceStates.UNLIMITED, failedAt)
                .stats()
                .get(StatKind.RESERVED_BYTES)
                .peak();
        long capacity = Math.max(64 * MiB, peakReserved / 2 / (2 * MiB) * (2 * MiB));
        CachingAllocator expected = byHand(trace, last, capacity, failedAt);
        assertThat(failedAt[0])
                .as("seed %d: half the peak fails a request", seed)
                .isPositive();

        MemoryState replayed = TraceStates.afterEntry(log, 0, last, capacity);
        assertThat(replayed.oom()).as("seed %d", seed).isPresent();
        OomEvent oom = replayed.oom().orElseThrow();
        assertThat(oom.entryIndex()).isEqualTo(failedAt[0]);
        assertThat(oom.requestBytes())
                .isEqualTo(SizeRules.roundSize(trace.get(failedAt[0]).size(), AllocatorConfig.defaults()));
        assertThat(TraceStatesTest.shape(replayed)).isEqualTo(shapeOf(expected));
        assertThat(replayed.label()).contains("the request of entry #" + failedAt[0] + " fails");

        DeviceAnalysis analysis = analyzeByDefault(log, capacity);
        assertThat(analysis.end()).as("the analysed moment is the failure").isEqualTo(failedAt[0] + 1);
        assertThat(oom.replayed()).isTrue();
        assertThat(analysis.analysis().diagnosis().trigger())
                .as("the log has no oom entry there: the replay hit it")
                .startsWith("replayed oom at entry #" + failedAt[0] + ": ");
        assertThat(analysis.analysis().diagnosis().kind()).isNotEqualTo(DiagnosisKind.NONE);
    }

    @Test
    void byDefaultTheMomentIsThePeakOfAllocatedBytesNotTheEmptyEnd() throws IOException {
        long seed = System.nanoTime();
        System.out.println("RequestsOnlyStatesTest seed " + seed);
        TraceSnapshot log = rmmLog(seed, 200, true);
        List<TraceEntry> trace = log.traceOf(0);
        // the peak counted independently: each live request at its rounded size
        Map<Long, Long> live = new HashMap<>();
        long level = 0;
        long peak = -1;
        int peakEntry = -1;
        for (int i = 0; i < trace.size(); i++) {
            TraceEntry e = trace.get(i);
            if (e.action() == TraceAction.ALLOC) {
                long bytes = SizeRules.roundSize(e.size(), AllocatorConfig.defaults());
                live.put(e.addr(), bytes);
                level += bytes;
            } else if (e.action() == TraceAction.FREE_REQUESTED) {
                level -= live.remove(e.addr());
            }
            if (level > peak) {
                peak = level;
                peakEntry = i;
            }
        }
        DeviceAnalysis analysis = analyzeByDefault(log, MemoryState.UNKNOWN);
        assertThat(analysis.end() - 1).as("seed %d", seed).isEqualTo(peakEntry);
        assertThat(analysis.analysis().all().allocated()).isGreaterThanOrEqualTo(peak);

        // the end of this run: every block freed, a cache of free segments, whose ratio is no ratio at all
        MemoryState end = TraceStates.afterEntry(log, 0, trace.size() - 1, MemoryState.UNKNOWN);
        StateAnalysis atEnd = new StateAnalyzer().analyze(end);
        assertThat(atEnd.all().allocated()).isZero();
        assertThat(atEnd.all().reserved()).isPositive();
        assertThat(atEnd.all().reservedPerAllocatedText()).isEqualTo("inf");
        assertThat(analysis.analysis().all().reservedPerAllocatedText()).matches("\\d+\\.\\d{3}");
    }

    @Test
    void anOpsScriptIsReplayedOnTheDeviceItDeclaresUnlessACapacityIsGiven() throws IOException {
        Path file = dir.resolve("three.ops");
        Files.write(
                file,
                List.of(
                        "device capacity=160MiB granularity=2MiB held=32MiB",
                        "alloc a 60MiB",
                        "alloc b 60MiB",
                        "alloc c 60MiB",
                        "free a",
                        "free b",
                        "free c"));
        TraceSnapshot script = TraceReaders.read(file);
        assertThat(script.format()).isEqualTo(SourceFormat.OPS_SCRIPT);
        assertThat(TraceStates.replayCapacity(script, MemoryState.UNKNOWN)).isEqualTo(128 * MiB);
        List<TraceEntry> trace = script.traceOf(0);
        int third = -1;
        for (int i = 0, allocs = 0; i < trace.size() && third < 0; i++) {
            if (trace.get(i).action() == TraceAction.ALLOC && ++allocs == 3) {
                third = i;
            }
        }
        DeviceAnalysis onItsDevice = analyzeByDefault(script, MemoryState.UNKNOWN);
        assertThat(onItsDevice.analysis().state().oom().map(OomEvent::entryIndex))
                .as("the third 60 MiB request does not fit the 128 MiB left")
                .contains((long) third);
        assertThat(onItsDevice.analysis().all().allocated()).isEqualTo(120 * MiB);

        DeviceAnalysis onALargerOne = analyzeByDefault(script, 1L << 30);
        assertThat(TraceStates.replayCapacity(script, 1L << 30)).isEqualTo(1L << 30);
        assertThat(onALargerOne.analysis().state().oom()).isEmpty();
        assertThat(onALargerOne.analysis().all().allocated())
                .as("the peak: all three")
                .isEqualTo(180 * MiB);
    }

    @Test
    void anOomTheLogRecordedIsTheReplayedStatesOom() throws IOException {
        Path file = dir.resolve("failure.csv");
        Files.write(
                file,
                List.of(
                        "Thread,Time,Action,Pointer,Size,Stream",
                        "1,0.001,allocate,0x7f0000000000,10485760,0x0",
                        "1,0.002,allocate failure,0x0,99999999999,0x0",
                        "1,0.003,free,0x7f0000000000,10485760,0x0"));
        TraceSnapshot log = TraceReaders.read(file);
        int failure = -1;
        for (int i = 0; i < log.traceOf(0).size(); i++) {
            failure = log.traceOf(0).get(i).action() == TraceAction.OOM ? i : failure;
        }
        DeviceAnalysis analysis = analyzeByDefault(log, MemoryState.UNKNOWN);
        assertThat(analysis.end() - 1).as("the recorded failure is the moment").isEqualTo(failure);
        OomEvent oom = analysis.analysis().state().oom().orElseThrow();
        assertThat(oom.entryIndex()).isEqualTo(failure);
        assertThat(oom.replayed()).as("the log recorded it").isFalse();
        assertThat(oom.requestBytes()).isEqualTo(99_999_999_999L);
        assertThat(analysis.analysis().all().allocated())
                .as("the 10 MiB block is live")
                .isEqualTo(10 * MiB);
        assertThat(analysis.analysis().all().reserved())
                .as("the state the failed request met: the replay to it does not ask it")
                .isEqualTo(10 * MiB);

        // The what-if runs ask it again: at the capacity the logged requests reserve, it fails again.
        WhatIfReplay whatIf = new WhatIfReplay(log, 0, new WindowRebuilder(RecordedConfig.of(log)).rebuild(log, 0));
        AllocatorConfig config = RecordedConfig.of(log);
        RunOutcome row = whatIf.evaluate(config, true, whatIf.recordedCapacity(config));
        assertThat(whatIf.recordedCapacity(config)).isEqualTo(10 * MiB);
        assertThat(row.ooms()).isEqualTo(1);
        assertThat(row.minCapacity()).isGreaterThanOrEqualTo(99_999_999_999L + 10 * MiB);
    }
}
