package io.gpumem.cli.trace;

import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.gpumem.cli.CliRun;
import io.gpumem.history.BlockState;
import io.gpumem.history.SegmentInfo;
import io.gpumem.history.TraceAction;
import io.gpumem.history.TraceEntry;
import io.gpumem.trace.io.PytorchSnapshotReader;
import io.gpumem.trace.io.TraceSnapshot;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** {@code snapshot FILE} in {@code gpumem sim}: PyTorch's current format, every key of allocator.md §10. */
class SimSnapshotTest {

    static CliRun sim(Path script) {
        return TraceCommandsTest.run("sim", script.toString());
    }

    @Test
    void simWritesASnapshotWithTheScriptsHistory(@TempDir Path dir) throws Exception {
        Path out = dir.resolve("sim.pickle");
        Path script = dir.resolve("s.ops");
        Files.writeString(
                script,
                String.join("\n", "alloc a 1000", "alloc b 3MiB", "alloc c 25000000", "free b", "snapshot " + out, ""));
        CliRun r = sim(script);
        assertThat(r.exit()).as(r.err()).isZero();
        TraceSnapshot s = new PytorchSnapshotReader().read(out);
        // a: small segment of 2 MiB; b: a 20 MiB segment, freed; c: its own 24 MiB segment.
        assertThat(s.segments())
                .extracting(SegmentInfo::totalSize)
                .containsExactlyInAnyOrder(2L << 20, 20L << 20, 24L << 20);
        List<TraceEntry> t = s.traceOf(0);
        assertThat(t)
                .extracting(TraceEntry::action)
                .containsExactly(
                        TraceAction.SEGMENT_ALLOC,
                        TraceAction.ALLOC,
                        TraceAction.SEGMENT_ALLOC,
                        TraceAction.ALLOC,
                        TraceAction.SEGMENT_ALLOC,
                        TraceAction.ALLOC,
                        TraceAction.FREE_REQUESTED,
                        TraceAction.FREE_COMPLETED);
        assertThat(t.get(1).size()).isEqualTo(1000);
        long allocated = s.segments().stream()
                .flatMap(g -> g.blocks().stream())
                .filter(b -> b.state() == BlockState.ACTIVE_ALLOCATED)
                .mapToLong(b -> b.size())
                .sum();
        // c rounds to 25,000,448 in a 24 MiB segment; the 161.5 KiB remainder is too small to split off (<= 1 MiB),
        // so c holds the whole segment (allocator.md §2.3).
        assertThat(allocated).isEqualTo(1024 + (24L << 20));
    }

    @Test
    void pythonLoadsTheSimSnapshotWithEveryKeyOfTheSpec(@TempDir Path dir) throws Exception {
        boolean python;
        try {
            python = new ProcessBuilder("python3", "-c", "pass").start().waitFor() == 0;
        } catch (Exception e) {
            python = false;
        }
        assumeTrue(python, "python3 not found: skipped the standard-pickle check");
        Path out = dir.resolve("exp.pickle");
        Path script = dir.resolve("s.ops");
        Files.writeString(
                script,
                "config expandable_segments:True\nalloc a 3MiB\nalloc b 30MiB\nfree a\n" + "snapshot " + out + "\n");
        CliRun r = sim(script);
        assertThat(r.exit()).as(r.err()).isZero();
        String check = """
                import pickle, sys
                d = pickle.load(open(sys.argv[1], 'rb'))
                assert set(d) == {'segments','device_traces','allocator_settings','external_annotations'}, set(d)
                seg_keys = {'device','address','total_size','allocated_size','active_size','requested_size','stream',
                            'segment_type','segment_pool_id','is_expandable','frames','blocks'}
                for s in d['segments']:
                    assert set(s) == seg_keys, set(s) ^ seg_keys
                    assert s['is_expandable'] is True and s['segment_pool_id'] == (0, 0)
                    for b in s['blocks']:
                        assert set(b) == {'address','size','requested_size','state','frames'}, set(b)
                for e in d['device_traces'][0]:
                    assert {'action','addr','size','stream','time_us'} <= set(e), set(e)
                acts = [e['action'] for e in d['device_traces'][0]]
                st = d['allocator_settings']
                assert st['expandable_segments'] is True and st['PYTORCH_CUDA_ALLOC_CONF'] == 'expandable_segments:True', st
                print(acts.count('segment_map'), acts.count('alloc'), len(d['segments']))
                """;
        Process p = new ProcessBuilder("python3", "-c", check, out.toString())
                .redirectErrorStream(true)
                .start();
        String text = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8).strip();
        assertThat(p.waitFor()).as(text).isZero();
        // allocator.md §5.3: 3 MiB maps one 20 MiB page, 30 MiB grows the segment by one more: 2 maps, one mapped run.
        assertThat(text).isEqualTo("2 2 1");
    }

    @Test
    void snapshotToAnUnwritablePlaceFailsWithTheLine(@TempDir Path dir) throws Exception {
        Path script = dir.resolve("s.ops");
        // a missing directory is refused with the script's other errors, before anything runs
        Files.writeString(script, "alloc a 1000\nsnapshot " + dir.resolve("no/such/dir/x.pickle") + "\n");
        CliRun refused = sim(script);
        assertThat(refused.exit()).isEqualTo(2);
        assertThat(refused.err()).contains("line 2: snapshot").contains("does not exist");
        // a write that fails only when it is made (a name longer than the file system takes) stops the run there
        Files.writeString(script, "alloc a 1000\nsnapshot " + dir.resolve("x".repeat(300) + ".pickle") + "\n");
        CliRun r = sim(script);
        assertThat(r.exit()).isEqualTo(1);
        assertThat(r.err())
                .contains("line 2: snapshot")
                .contains("cannot write")
                .doesNotContain("\tat ");
        Files.writeString(script, "snapshot\n");
        assertThat(sim(script).exit()).isEqualTo(2);
    }
}
