package io.gpumem.report;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpumem.config.AllocatorConfig;
import io.gpumem.history.FileKeys;
import io.gpumem.history.Frame;
import io.gpumem.history.TraceAction;
import io.gpumem.history.TraceEntry;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

class TimelineTest {
    static final long MIB = 1L << 20;
    static final List<Frame> USER = List.of(
            new Frame("/usr/lib/python3/site-packages/torch/nn/functional.py", 407, "einsum"),
            new Frame("/home/me/model.py", 88, "forward"),
            new Frame("/home/me/train.py", 12, "main"));
    static final List<Frame> OPTIM = List.of(new Frame("/home/me/optim.py", 100, "step"));

    static TraceEntry entry(TraceAction action, long addr, long size, List<Frame> frames) {
        return new TraceEntry(
                action,
                addr,
                size,
                0,
                0,
                frames,
                0,
                FileKeys.of(TraceEntry.ADDR | TraceEntry.SIZE | TraceEntry.STREAM));
    }

    @Test
    void countsRoundedBlocksPerSiteAndSegmentsExactly() {
        long seg = 0x7f0000000000L;
        List<TraceEntry> trace = List.of(
                entry(TraceAction.SEGMENT_ALLOC, seg, 20 * MIB, USER),
                entry(TraceAction.ALLOC, seg, 1000, USER), // rounds to 1024
                entry(TraceAction.ALLOC, seg + 1024, 3 * MIB, OPTIM),
                entry(TraceAction.FREE_REQUESTED, seg, 1000, USER),
                entry(TraceAction.FREE_COMPLETED, seg, 1000, USER),
                entry(TraceAction.FREE_COMPLETED, seg + 1024, 3 * MIB, OPTIM),
                entry(TraceAction.SEGMENT_FREE, seg, 20 * MIB, null));
        Timeline t = new Timeline(trace, null, AllocatorConfig.defaults(), new Sites(), Map.of());
        // as many points as entries: every entry is a point, with its own bytes
        Timeline.Sampled all = t.sample(trace.size(), 2);
        assertThat(all.index()).containsExactly(0, 1, 2, 3, 4, 5, 6);
        assertThat(all.allocated()).containsExactly(0, 1024, 1024 + 3 * MIB, 1024 + 3 * MIB, 3 * MIB, 0, 0);
        assertThat(all.reserved()).containsExactly(20 * MIB, 20 * MIB, 20 * MIB, 20 * MIB, 20 * MIB, 20 * MIB, 0);
        assertThat(t.peakIndex).isEqualTo(2);
        assertThat(t.peakAllocated).isEqualTo(1024 + 3 * MIB);
        assertThat(t.peakReserved).isEqualTo(20 * MIB);
        Map<Long, int[]> atPeak = t.lifetimesAfter(2);
        assertThat(atPeak).containsOnlyKeys(seg, seg + 1024);
        // {site, alloc entry, free entry}
        assertThat(t.sites.label(atPeak.get(seg)[0])).isEqualTo("model.py:88 forward");
        assertThat(atPeak.get(seg)).endsWith(1, 4);
        assertThat(t.sites.label(atPeak.get(seg + 1024)[0])).isEqualTo("optim.py:100 step");
        assertThat(atPeak.get(seg + 1024)).endsWith(2, 5);
        assertThat(t.lifetimesAfter(4)).containsOnlyKeys(seg + 1024);
        assertThat(t.lifetimesAfter(-1)).isEmpty();
        assertThat(t.lifetimesAfter(6))
                .as("after the last entry: what the constructor's walk left")
                .isEmpty();
        Timeline open = new Timeline(trace.subList(0, 5), null, AllocatorConfig.defaults(), new Sites(), Map.of());
        assertThat(open.lifetimesAfter(4)).containsOnlyKeys(seg + 1024);
        assertThat(open.lifetimesAfter(4).get(seg + 1024)).endsWith(2, -1);
        assertThat(open.lifetimesAfter(3)).containsOnlyKeys(seg, seg + 1024);
        assertThat(open.lifetimesAfter(3).get(seg)).endsWith(1, 4);
        assertThat(open.lifetimesAfter(4)).as("a fresh map each time").isNotSameAs(open.lifetimesAfter(4));
    }

    @Test
    void samplingKeepsThePeakAndSplitsItBySite() {
        long seg = 0x7f0000000000L;
        List<TraceEntry> trace = new ArrayList<>();
        trace.add(entry(TraceAction.SEGMENT_ALLOC, seg, 1024 * MIB, USER));
        // a saw-tooth of 5000 alloc/free pairs with one high spike in the middle
        for (int i = 0; i < 5000; i++) {
            long size = i == 2500 ? 900 * MIB : MIB;
            trace.add(entry(TraceAction.ALLOC, seg, size, i % 2 == 0 ? USER : OPTIM));
            trace.add(entry(TraceAction.FREE_COMPLETED, seg, size, null));
        }
        Timeline t = new Timeline(trace, null, AllocatorConfig.defaults(), new Sites(), Map.of());
        Timeline.Sampled s = t.sample(300, 1);
        assertThat(s.index().length).isLessThanOrEqualTo(300);
        assertThat(s.index()).contains(t.peakIndex);
        int peakPoint = Arrays.stream(s.index()).boxed().toList().indexOf(t.peakIndex);
        assertThat(s.allocated()[peakPoint]).isEqualTo(900 * MIB);
        // one named site (the one that held most), the rest as "other"
        assertThat(s.sites()).hasSize(1);
        assertThat(t.sites.label(s.sites()[0])).isEqualTo("model.py:88 forward");
        assertThat(s.stack()[peakPoint]).containsExactly(900 * MIB, 0);
        for (int p = 0; p < s.index().length; p++) {
            assertThat(s.stack()[p][0] + s.stack()[p][1]).isEqualTo(s.allocated()[p]);
        }
    }

    /**
     * A long trace cut to a few hundred points still has a point at the peak and at every {@code oom} entry, each with
     * that entry's exact bytes, in entry order: the OOMs fall in the saw-tooth's troughs, which their buckets' points
     * (the buckets' highest allocated) would otherwise hide.
     */
    @Test
    void samplingKeepsEveryOomAndThePeakExactly() {
        long seg = 0x7f0000000000L;
        List<TraceEntry> trace = new ArrayList<>();
        trace.add(entry(TraceAction.SEGMENT_ALLOC, seg, 1024 * MIB, USER));
        List<Integer> ooms = new ArrayList<>();
        for (int i = 0; i < 5000; i++) {
            long size = i == 1234 ? 700 * MIB : (1 + i % 7) * MIB;
            trace.add(entry(TraceAction.ALLOC, seg, size, USER));
            trace.add(entry(TraceAction.FREE_COMPLETED, seg, size, null));
            if (i % 1000 == 999 || i == 1235) {
                ooms.add(trace.size());
                trace.add(entry(TraceAction.OOM, 0, 2048 * MIB, null));
            }
        }
        Timeline t = new Timeline(trace, null, AllocatorConfig.defaults(), new Sites(), Map.of());
        Timeline.Sampled s = t.sample(300, 1);
        Timeline.Sampled every = t.sample(trace.size(), 1);
        assertThat(s.index().length).isLessThanOrEqualTo(300 + ooms.size());
        assertThat(s.index()).isSorted().doesNotHaveDuplicates();
        List<Integer> points = Arrays.stream(s.index()).boxed().toList();
        assertThat(points).contains(t.peakIndex).containsAll(ooms);
        assertThat(s.allocated()[points.indexOf(t.peakIndex)]).isEqualTo(700 * MIB);
        for (int oom : ooms) {
            int p = points.indexOf(oom);
            assertThat(s.allocated()[p])
                    .as("allocated at OOM entry " + oom)
                    .isEqualTo(every.allocated()[oom])
                    .isZero();
            assertThat(s.reserved()[p]).as("reserved at OOM entry " + oom).isEqualTo(every.reserved()[oom]);
            assertThat(s.stack()[p][0] + s.stack()[p][1]).isZero();
        }
    }

    @Test
    void sitesSkipFrameworkFramesAndNameAutogradNodes() {
        assertThat(Sites.label(USER)).isEqualTo("model.py:88 forward");
        assertThat(Sites.label(List.of(
                        new Frame("??", 0, "torch::unwind::unwind()"),
                        new Frame(
                                "??",
                                0,
                                "torch::autograd::generated::MulBackward0::apply(std::vector<at::Tensor>&&)"))))
                .isEqualTo("backward: MulBackward0");
        assertThat(Sites.label(List.of(new Frame("/x/site-packages/torch/optim/adamw.py", 5, "step"))))
                .isEqualTo("adamw.py:5 step");
        Sites sites = new Sites();
        assertThat(sites.of(USER)).isEqualTo(sites.of(USER));
        assertThat(sites.label(sites.of(null))).isEqualTo(Sites.NO_STACK);
    }
}
