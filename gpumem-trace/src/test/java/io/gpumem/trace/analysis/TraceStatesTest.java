package io.gpumem.trace.analysis;

import static io.gpumem.testing.TestSizes.GiB;
import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.gpumem.alloc.CachingAllocator;
import io.gpumem.alloc.Pool;
import io.gpumem.config.AllocatorConfig;
import io.gpumem.device.SimulatedDevice;
import io.gpumem.engine.RequestStream;
import io.gpumem.history.BlockInfo;
import io.gpumem.history.BlockState;
import io.gpumem.history.HistoryOptions;
import io.gpumem.history.SegmentInfo;
import io.gpumem.history.TraceAction;
import io.gpumem.history.TraceEntry;
import io.gpumem.trace.io.AllocatorSnapshots;
import io.gpumem.trace.io.TraceReaders;
import io.gpumem.trace.io.TraceSnapshot;
import io.gpumem.trace.workload.TrainingWorkload;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.SplittableRandom;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

class TraceStatesTest {

    /** Segments as (address, stream, pool, expandable, blocks as address/size/state/requested-if-allocated). */
    static List<String> shape(MemoryState s) {
        List<String> out = new ArrayList<>();
        for (SegmentInfo seg : s.segments()) {
            StringBuilder sb = new StringBuilder();
            sb.append(seg.address())
                    .append(' ')
                    .append(seg.stream())
                    .append(' ')
                    .append(seg.pool())
                    .append(' ')
                    .append(seg.expandable())
                    .append(':');
            for (BlockInfo b : seg.blocks()) {
                sb.append(' ')
                        .append(b.address())
                        .append('/')
                        .append(b.size())
                        .append('/')
                        .append(b.state());
                if (b.state() == BlockState.ACTIVE_ALLOCATED) {
                    sb.append('/').append(b.requestedSize());
                }
            }
            out.add(sb.toString());
        }
        return out;
    }

    /**
     * Same segments, same live block addresses and requests; a live block's size may differ by a remainder the
     * allocator would not have split off (≤ 1 MiB large pool, < 512 B small pool or expandable), because a
     * block allocated before the entry and freed after it has its size inferred from its request
     * (replay-method.md: gap and slack rules).
     */
    static void assertSameUpToInferredSizes(MemoryState rebuilt, MemoryState live, String what) {
        assertThat(rebuilt.segments()).as(what + ": segments").hasSameSizeAs(live.segments());
        for (int k = 0; k < live.segments().size(); k++) {
            SegmentInfo r = rebuilt.segments().get(k);
            SegmentInfo l = live.segments().get(k);
            String where = what + ", segment 0x" + Long.toHexString(l.address());
            assertThat(List.of(r.address(), r.totalSize(), r.stream()))
                    .as(where)
                    .isEqualTo(List.of(l.address(), l.totalSize(), l.stream()));
            assertThat(r.pool()).as(where).isEqualTo(l.pool());
            List<BlockInfo> ra = r.blocks().stream()
                    .filter(b -> b.state() == BlockState.ACTIVE_ALLOCATED)
                    .toList();
            List<BlockInfo> la = l.blocks().stream()
                    .filter(b -> b.state() == BlockState.ACTIVE_ALLOCATED)
                    .toList();
            assertThat(ra).as(where + ": live blocks").hasSameSizeAs(la);
            long slack = l.pool() == Pool.LARGE && !l.expandable() ? 1L << 20 : 511;
            for (int b = 0; b < la.size(); b++) {
                assertThat(ra.get(b).address()).as(where).isEqualTo(la.get(b).address());
                assertThat(ra.get(b).requestedSize())
                        .as(where)
                        .isEqualTo(la.get(b).requestedSize());
                assertThat(la.get(b).size() - ra.get(b).size())
                        .as(where + ", block 0x" + Long.toHexString(la.get(b).address()))
                        .isBetween(0L, slack);
            }
        }
    }

    @Test
    void stateAfterAnEntryIsWhatTheAllocatorHeldThen() {
        long seed = Long.getLong("gpumem.test.seed", new SplittableRandom().nextLong());
        System.out.println("seed=" + seed);
        for (String conf : new String[] {"", "expandable_segments:True"}) {
            TrainingWorkload w = TrainingWorkload.builder()
                    .layers(3)
                    .hidden(512)
                    .heads(4)
                    .vocab(4000)
                    .batch(2)
                    .seqLens(128, 1024, 128)
                    .steps(3)
                    .seed(seed)
                    .build();
            CachingAllocator allocator =
                    new CachingAllocator(SimulatedDevice.withCapacity(8 * GiB), AllocatorConfig.parse(conf));
            allocator.recordHistory(HistoryOptions.all());
            RequestStream ops = w.stream();
            long[] ptr = new long[ops.slots()];
            int probeOp = new SplittableRandom(seed).nextInt(ops.length() / 4, ops.length() - 1);
            MemoryState probe = null;
            int probeEntries = -1;
            for (int i = 0; i < ops.length(); i++) {
                switch (ops.op(i)) {
                    case RequestStream.ALLOC -> ptr[ops.slot(i)] = allocator.malloc(ops.size(i), ops.stream(i));
                    case RequestStream.FREE -> allocator.free(ptr[ops.slot(i)]);
                    default -> {}
                }
                if (i == probeOp) {
                    probeEntries =
                            allocator.snapshot().deviceTraces().getFirst().size();
                    probe = AllocatorStates.fromSnapshot(allocator.snapshot(), 0, "probe")
                            .build();
                }
            }
            TraceSnapshot trace = AllocatorSnapshots.toTraceSnapshot(allocator.snapshot(), "run " + conf);
            MemoryState rebuilt = TraceStates.afterEntry(trace, 0, probeEntries - 1, MemoryState.UNKNOWN);
            assertSameUpToInferredSizes(rebuilt, probe, "'" + conf + "' after entry " + (probeEntries - 1));
            MemoryState last = TraceStates.afterEntry(trace, 0, trace.traceOf(0).size() - 1, MemoryState.UNKNOWN);
            assertThat(shape(last)).isEqualTo(shape(SnapshotStates.endState(trace, 0, MemoryState.UNKNOWN)));
        }
    }

    @Test
    void rebuildingAfterTheLastEntryOfRealTracesGivesTheirEndState() {
        String dir = System.getProperty("gpumem.traces.dir");
        assumeTrue(
                dir != null && Files.isDirectory(Path.of(dir)),
                "real traces not available (system property gpumem.traces.dir = " + dir + "): skipped");
        for (String name :
                new String[] {"tiny-forward.pickle", "nca-train-empty-cache.pickle", "lm2.7b-train-step.pickle"}) {
            Path file = Path.of(dir, name);
            assumeTrue(Files.isRegularFile(file), file + " not available: skipped");
            TraceSnapshot s = TraceReaders.read(file);
            int n = s.traceOf(0).size();
            MemoryState end = SnapshotStates.endState(s, 0, MemoryState.UNKNOWN);
            MemoryState rebuilt = TraceStates.afterEntry(s, 0, n - 1, MemoryState.UNKNOWN);
            assertThat(shape(rebuilt)).as(name).isEqualTo(shape(end));
            // the state after the first entry rebuilds too (every later entry undone)
            MemoryState first = TraceStates.afterEntry(s, 0, 0, MemoryState.UNKNOWN);
            assertThat(first.segments()).isNotEmpty();
        }
    }

    @Test
    void oomStaysInForceOnlyWhileNothingChanges() {
        var e = TraceEntry.of(TraceAction.OOM, 0, 1 << 20, 0);
        var alloc = TraceEntry.of(TraceAction.ALLOC, 4096, 512, 0);
        var snap = TraceEntry.of(TraceAction.SNAPSHOT, 0, 0, 0);
        assertThat(TraceStates.oomInForce(List.of(alloc, e, snap), 2)).isEqualTo(1);
        assertThat(TraceStates.oomInForce(List.of(alloc, e, alloc), 2)).isEqualTo(-1);
        assertThat(TraceStates.lastOom(List.of(e, alloc, e, alloc))).isEqualTo(2);
        assertThat(SnapshotStates.trailingOom(List.of(alloc, e, snap))).isEqualTo(1);
        assertThat(SnapshotStates.trailingOom(List.of(e, alloc))).isEqualTo(-1);
    }

    /**
     * A state before an {@code empty_cache()} that unmaps an expandable segment on a side stream, rebuilt from the
     * end: the segment is back with its own stream and pool, not those of the nearest other segment (here the
     * small pool's on stream 0). {@code remap}: a later request maps the range again, so that walking back its map is
     * undone first and leaves the segment's group empty; else the range stays unmapped to the end.
     */
    @ParameterizedTest
    @ValueSource(booleans = {true, false})
    void anExpandableSegmentUnmappedLaterKeepsItsStreamAndPool(boolean remap) {
        SimulatedDevice device = SimulatedDevice.withCapacity(8 * GiB);
        CachingAllocator allocator = new CachingAllocator(device, AllocatorConfig.parse("expandable_segments:True"));
        allocator.recordHistory(HistoryOptions.all());
        long side = device.createStream();
        long a = allocator.malloc(30L << 20, side); // large pool, side stream: two 20 MiB pages
        allocator.malloc(1000, 0); // small pool, stream 0
        allocator.free(a);
        int probeEntries = allocator.snapshot().deviceTraces().getFirst().size();
        MemoryState probe =
                AllocatorStates.fromSnapshot(allocator.snapshot(), 0, "probe").build();
        allocator.emptyCache(); // unmaps the side stream's pages
        if (remap) {
            allocator.malloc(10L << 20, side); // maps one page of the same segment again
        }
        TraceSnapshot trace = AllocatorSnapshots.toTraceSnapshot(allocator.snapshot(), "unmap");
        assertThat(trace.traceOf(0)).anyMatch(e -> e.action() == TraceAction.SEGMENT_UNMAP);

        MemoryState rebuilt = TraceStates.afterEntry(trace, 0, probeEntries - 1, MemoryState.UNKNOWN);

        assertThat(probe.segments()).anyMatch(s -> s.stream() == side && !s.isSmall() && s.expandable());
        assertSameUpToInferredSizes(rebuilt, probe, "after entry " + (probeEntries - 1));
    }
}
