package io.gpumem.trace.replay;

import static io.gpumem.trace.replay.Recordings.read;
import static io.gpumem.trace.replay.Recordings.shift;
import static io.gpumem.trace.replay.Recordings.traceCopy;
import static io.gpumem.trace.replay.Recordings.twoDevices;
import static io.gpumem.trace.replay.Recordings.withTrace;
import static org.assertj.core.api.Assertions.assertThat;

import io.gpumem.history.BlockInfo;
import io.gpumem.history.BlockState;
import io.gpumem.history.FileKeys;
import io.gpumem.history.SegmentInfo;
import io.gpumem.history.TraceAction;
import io.gpumem.history.TraceEntry;
import io.gpumem.trace.io.TraceSnapshot;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/**
 * The snapshot a replay writes ({@code writeSnapshot(true)}) where the model departs from the recording: a block
 * the recording claims elsewhere is written, with its free, at the model's address; a segment whose blocks differ
 * is the model's, with the recording's blocks and stack where they agree; devices' segments come out in address
 * order. PIT showed the bookkeeping of moved blocks and the merge of differing segments unpinned (every shared
 * recording replays exactly, so the written snapshot was only ever the recording itself).
 *
 * <p>In {@code tiny-forward} the block allocated at entry 12 (0x7f2118400000) is freed at 21/22, the one of entry 19
 * at 65/66; the one of entry 33 (0x7f2118400200) is freed by the trace's last entries, 95/96.
 */
class ReplayedDepartureTest {

    private static final long MOVE = 512;

    private static OracleReplay writing() {
        return new OracleReplay().writeSnapshot(true);
    }

    @Test
    void blocksTheRecordingClaimsElsewhereAreWrittenWhereTheModelPutThem() {
        TraceSnapshot s = read("tiny-forward.pickle");
        List<TraceEntry> t = traceCopy(s, 0);
        shift(t, 12, MOVE); // the alloc only: its free, at the real address, frees what the model holds there
        for (int i : new int[] {19, 65, 66}) { // the alloc and its free
            shift(t, i, MOVE);
        }
        shift(t, 33, MOVE); // the alloc only, freed after the last request
        OracleReplay replay = writing();
        FidelityReport r = replay.check(withTrace(s, 0, t));
        assertThat(r.allocs() - r.exact()).isEqualTo(3);
        assertThat(r.firstMismatch().entry()).isEqualTo(12);
        assertThat(r.devices().getFirst().notes()).isEmpty();
        // the model placed every block where PyTorch did: it writes the untampered recording, stacks and times included
        TraceSnapshot written = replay.replayedSnapshot();
        assertThat(written.traceOf(0)).isEqualTo(s.traceOf(0));
        assertThat(written.segments()).isEqualTo(s.segments());
    }

    @Test
    void aRequestAfterAFreeTheStreamDroppedIsWrittenWithItsOwnStackAndTime() {
        TraceSnapshot s = read("tiny-forward.pickle");
        List<TraceEntry> t = traceCopy(s, 0);
        shift(t, 12, MOVE); // its free (21/22, at the real address) frees no block of the stream: dropped
        OracleReplay replay = writing();
        replay.check(withTrace(s, 0, t));
        // entry 23, the next request, was written with the frames and time of entry 22 (the dropped free's) until the
        // replay freed dropped blocks before taking the op's entry as the one being replayed
        assertThat(replay.replayedSnapshot().traceOf(0)).isEqualTo(s.traceOf(0));
    }

    @Test
    void aFreeAtTheRecordedAddressOfAMovedBlockThatIsGoneFreesNothing() {
        TraceSnapshot s = read("tiny-forward.pickle");
        List<TraceEntry> t = traceCopy(s, 0);
        for (int i : new int[] {12, 21, 22}) {
            shift(t, i, MOVE);
        }
        // the free repeated once the block is gone: the model holds nothing at 0x7f2118400200 then
        t.add(27, t.get(21));
        t.add(28, t.get(22));
        OracleReplay replay = writing();
        FidelityReport r = replay.check(withTrace(s, 0, t));
        assertThat(r.devices().getFirst().notes())
                .containsExactly("entry 28: free of 0x7f2118400200 that the model does not hold (free: 0x7f2118400200"
                        + " is not an allocated block of this allocator (foreign pointer or double free))");
        assertThat(r.allocs() - r.exact()).isEqualTo(1);
        // written: the recording, with the repeated request as recorded and no completion for it
        List<TraceEntry> expected = new ArrayList<>(s.traceOf(0));
        expected.add(27, t.get(27));
        assertThat(replay.replayedSnapshot().traceOf(0)).isEqualTo(expected);
    }

    @Test
    void aSegmentWhoseBlocksDifferIsTheModelsWithTheRecordedBlocksAndStackWhereTheyAgree() {
        TraceSnapshot s = read("lm-medium-train-ctx128.pickle"); // every segment predates the window
        List<TraceEntry> t = traceCopy(s, 0);
        int victim = lastLiveAlloc(t);
        TraceEntry e = t.get(victim);
        long asked = e.size() - 1; // rounds as the recorded size does: the same block, another requested size
        t.set(
                victim,
                new TraceEntry(
                        e.action(),
                        e.addr(),
                        asked,
                        e.stream(),
                        e.timeUs(),
                        e.frames(),
                        e.deviceFree(),
                        FileKeys.of(e.fields(), e.actionName(), null, e.extra())));
        OracleReplay replay = writing();
        FidelityReport r = replay.check(withTrace(s, 0, t));
        assertThat(r.exact()).isEqualTo(r.allocs());

        SegmentInfo recorded = holding(s.segments(), e.addr());
        SegmentInfo written = holding(replay.replayedSnapshot().segments(), e.addr());
        assertThat(written).isNotEqualTo(recorded);
        assertThat(written.address()).isEqualTo(recorded.address());
        assertThat(written.totalSize()).isEqualTo(recorded.totalSize());
        assertThat(written.frames())
                .as("the model restored it: the recorded stack")
                .isEqualTo(recorded.frames());
        assertThat(written.blocks()).hasSameSizeAs(recorded.blocks());
        for (int i = 0; i < written.blocks().size(); i++) {
            BlockInfo w = written.blocks().get(i);
            BlockInfo b = recorded.blocks().get(i);
            if (b.address() == e.addr()) {
                assertThat(b.requestedSize()).isEqualTo(e.size());
                assertThat(w.requestedSize()).isEqualTo(asked);
                assertThat(w.size()).isEqualTo(b.size());
                assertThat(w.state()).isEqualTo(BlockState.ACTIVE_ALLOCATED);
            } else {
                assertThat(w).as("block " + i).isEqualTo(b);
            }
        }
    }

    @Test
    void theSegmentsOfSeveralDevicesAreWrittenInAddressOrder() {
        // device 0's addresses are above device 1's: sorted by address, device 1's segments come first
        TraceSnapshot two = twoDevices(read("nca-train-empty-cache.pickle"), read("tiny-forward.pickle"), true);
        List<SegmentInfo> segments = two.segments();
        OracleReplay replay = writing();
        assertThat(replay.check(two).isExact()).isTrue();
        assertThat(segments.getFirst().device()).isEqualTo(1);
        assertThat(replay.replayedSnapshot().segments()).isEqualTo(segments);
    }

    /** The index of the last alloc whose block is live at the end (and whose size less one rounds the same). */
    private static int lastLiveAlloc(List<TraceEntry> trace) {
        Map<Long, Integer> live = new HashMap<>();
        for (int i = 0; i < trace.size(); i++) {
            TraceEntry e = trace.get(i);
            if (e.action() == TraceAction.ALLOC && e.size() % 512 != 1) {
                live.put(e.addr(), i);
            } else if (e.action() == TraceAction.FREE_COMPLETED) {
                live.remove(e.addr());
            }
        }
        return live.values().stream().mapToInt(Integer::intValue).max().orElseThrow();
    }

    private static SegmentInfo holding(List<SegmentInfo> segments, long address) {
        return segments.stream()
                .filter(seg -> seg.address() <= address && address < seg.address() + seg.totalSize())
                .findFirst()
                .orElseThrow();
    }
}
