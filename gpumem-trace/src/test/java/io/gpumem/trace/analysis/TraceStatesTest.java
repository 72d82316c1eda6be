package io.gpumem.trace.analysis;

import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.gpumem.alloc.CachingAllocator;
import io.gpumem.config.AllocatorConfig;
import io.gpumem.device.SimulatedDevice;
import io.gpumem.history.HistoryOptions;
import io.gpumem.trace.io.TraceReaders;
import io.gpumem.trace.io.TraceSnapshot;
import io.gpumem.trace.workload.MemoryOp;
import io.gpumem.trace.workload.SnapshotExport;
import io.gpumem.trace.workload.TrainingWorkload;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.SplittableRandom;
import org.junit.jupiter.api.Test;

class TraceStatesTest {
    static final long GIB = 1L << 30;

    /** Segments as (address, stream, pool, expandable, blocks as address/size/state/requested-if-allocated). */
    static List<String> shape(MemoryState s) {
        List<String> out = new ArrayList<>();
        for (StateSegment seg : s.segments()) {
            StringBuilder sb = new StringBuilder();
            sb.append(seg.address()).append(' ').append(seg.stream()).append(' ').append(seg.pool()).append(' ')
                    .append(seg.expandable()).append(':');
            for (StateBlock b : seg.blocks()) {
                sb.append(' ').append(b.address()).append('/').append(b.size()).append('/').append(b.state());
                if (b.state() == BlockState.ALLOCATED) {
                    sb.append('/').append(b.requestedSize());
                }
            }
            out.add(sb.toString());
        }
        return out;
    }

    @Test
    void stateAfterAnEntryIsWhatTheAllocatorHeldThen() {
        long seed = new SplittableRandom().nextLong();
        System.out.println("seed=" + seed);
        for (String conf : new String[] {"", "expandable_segments:True"}) {
            TrainingWorkload w = TrainingWorkload.builder().layers(3).hidden(512).heads(4).vocab(4000).batch(2)
                    .seqLens(128, 1024, 128).steps(3).seed(seed).build();
            CachingAllocator allocator = new CachingAllocator(SimulatedDevice.withCapacity(8 * GIB), AllocatorConfig.parse(conf));
            allocator.recordHistory(HistoryOptions.all());
            long[] ptr = new long[w.allocationCount()];
            List<MemoryOp> ops = w.ops();
            int probeOp = new SplittableRandom(seed).nextInt(ops.size() / 4, ops.size() - 1);
            MemoryState probe = null;
            int probeEntries = -1;
            for (int i = 0; i < ops.size(); i++) {
                switch (ops.get(i)) {
                    case MemoryOp.Alloc a -> ptr[a.id()] = allocator.malloc(a.bytes(), a.stream());
                    case MemoryOp.Free f -> allocator.free(ptr[f.id()]);
                    case MemoryOp.StepStart s -> { }
                }
                if (i == probeOp) {
                    probeEntries = allocator.snapshot().deviceTraces().getFirst().size();
                    probe = AllocatorStates.fromSnapshot(allocator.snapshot(), 0, "probe").build();
                }
            }
            TraceSnapshot trace = SnapshotExport.toTrace(allocator.snapshot(), "run " + conf);
            MemoryState rebuilt = TraceStates.afterEntry(trace, 0, probeEntries - 1, MemoryState.UNKNOWN);
            assertThat(shape(rebuilt)).as(conf + " after entry " + (probeEntries - 1)).isEqualTo(shape(probe));
            MemoryState last = TraceStates.afterEntry(trace, 0, trace.traceOf(0).size() - 1, MemoryState.UNKNOWN);
            assertThat(shape(last)).isEqualTo(shape(SnapshotStates.endState(trace, 0, MemoryState.UNKNOWN)));
        }
    }

    @Test
    void rebuildingAfterTheLastEntryOfRealTracesGivesTheirEndState() {
        String dir = System.getProperty("gpumem.traces.dir");
        assumeTrue(dir != null && Files.isDirectory(Path.of(dir)),
                "real traces not available (system property gpumem.traces.dir = " + dir + "): skipped");
        for (String name : new String[] {"tiny-forward.pickle", "nca-train-empty-cache.pickle", "lm2.7b-train-step.pickle"}) {
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
        var e = io.gpumem.trace.io.TraceEntry.of(io.gpumem.trace.io.TraceAction.OOM, 0, 1 << 20, 0);
        var alloc = io.gpumem.trace.io.TraceEntry.of(io.gpumem.trace.io.TraceAction.ALLOC, 4096, 512, 0);
        var snap = io.gpumem.trace.io.TraceEntry.of(io.gpumem.trace.io.TraceAction.SNAPSHOT, 0, 0, 0);
        assertThat(TraceStates.oomInForce(List.of(alloc, e, snap), 2)).isEqualTo(1);
        assertThat(TraceStates.oomInForce(List.of(alloc, e, alloc), 2)).isEqualTo(-1);
        assertThat(TraceStates.lastOom(List.of(e, alloc, e, alloc))).isEqualTo(2);
        assertThat(SnapshotStates.trailingOom(List.of(alloc, e, snap))).isEqualTo(1);
        assertThat(SnapshotStates.trailingOom(List.of(e, alloc))).isEqualTo(-1);
    }
}
