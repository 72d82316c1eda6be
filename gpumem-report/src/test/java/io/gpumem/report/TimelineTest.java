package io.gpumem.report;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.gpumem.config.AllocatorConfig;
import io.gpumem.history.FileKeys;
import io.gpumem.history.Frame;
import io.gpumem.history.TraceAction;
import io.gpumem.history.TraceEntry;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
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
        Timeline t =
                new Timeline(trace, null, AllocatorConfig.defaults(), new Sites(), Map.of(), trace.size(), 4, -1, 6, 2);
        // as many points as entries: every entry is a point, with its own bytes
        Timeline.Sampled all = t.sample(2);
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
        assertThat(t.lifetimesAtPeak()).containsOnlyKeys(seg, seg + 1024);
        assertThat(t.lifetimesAtPeak().get(seg)).containsExactly(atPeak.get(seg));
        assertThat(t.lifetimesAtPeak().get(seg + 1024)).containsExactly(atPeak.get(seg + 1024));
        assertThat(t.lifetimesAfter(4)).containsOnlyKeys(seg + 1024);
        assertThat(t.lifetimesAfter(-1)).isEmpty();
        assertThat(t.lifetimesAfter(6))
                .as("after the last entry: what the constructor's walk left")
                .isEmpty();
        assertThatThrownBy(() -> t.lifetimesAfter(3)).isInstanceOf(IllegalArgumentException.class);
        assertThat(t.lifetimesAfter(99)).as("past the end: the end").isEmpty();
        Timeline open =
                new Timeline(trace.subList(0, 5), null, AllocatorConfig.defaults(), new Sites(), Map.of(), 5, 3, 4);
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
        Timeline t = new Timeline(trace, null, AllocatorConfig.defaults(), new Sites(), Map.of(), 300);
        Timeline.Sampled s = t.sample(1);
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
        Timeline t = new Timeline(trace, null, AllocatorConfig.defaults(), new Sites(), Map.of(), 300);
        Timeline.Sampled s = t.sample(1);
        Timeline.Sampled every =
                new Timeline(trace, null, AllocatorConfig.defaults(), new Sites(), Map.of(), trace.size()).sample(1);
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

    /**
     * The one walk gives what a recount entry by entry gives, on a seeded random trace with many sites, lost frees
     * (an alloc at a live address), OOMs and segment moves: each point's allocated bytes and split by site, the
     * peak, and the lifetimes at the moments asked for and at the peak, for buckets of one entry and of many.
     */
    @Test
    void oneWalkAgreesWithARecountEntryByEntry() {
        long seed = Long.getLong("gpumem.seed", System.nanoTime());
        System.out.println("TimelineTest.oneWalkAgreesWithARecountEntryByEntry seed " + seed
                + " (rerun with -Dgpumem.seed=" + seed + ")");
        Random random = new Random(seed);
        // at 0 the first block has the address of a trace recorded without addresses, which the walk's table of
        // open blocks keeps apart
        for (long seg : new long[] {0x7f0000000000L, 0}) {
            agreesWithARecount(random, seg);
        }
    }

    private static void agreesWithARecount(Random random, long seg) {
        List<List<Frame>> stacks = new ArrayList<>();
        for (int k = 0; k < 12; k++) {
            stacks.add(List.of(new Frame("/home/me/layer" + k + ".py", k + 1, "forward")));
        }
        List<TraceEntry> trace = new ArrayList<>();
        trace.add(entry(TraceAction.SEGMENT_ALLOC, seg, 1024 * MIB, null));
        List<Long> live = new ArrayList<>();
        long next = seg;
        for (int i = 0; i < 3000; i++) {
            int choice = random.nextInt(100);
            long size = (1 + random.nextInt(4096)) * 512L; // multiples of 512: counted as requested
            List<Frame> stack = stacks.get(random.nextInt(stacks.size()));
            if (choice < 50 || live.isEmpty()) {
                trace.add(entry(TraceAction.ALLOC, next, size, stack));
                live.add(next);
                next += 4 * MIB;
            } else if (choice < 93) {
                long addr = live.remove(random.nextInt(live.size()));
                trace.add(entry(TraceAction.FREE_COMPLETED, addr, 0, null));
            } else if (choice < 96) { // a lost free: the live block at this address is retired
                trace.add(entry(TraceAction.ALLOC, live.get(random.nextInt(live.size())), size, stack));
            } else if (choice < 98) {
                trace.add(entry(TraceAction.OOM, 0, 2048 * MIB, null));
            } else {
                trace.add(
                        entry(choice == 98 ? TraceAction.SEGMENT_ALLOC : TraceAction.SEGMENT_FREE, seg, 2 * MIB, null));
            }
        }
        int n = trace.size();
        // the recount: after each entry, allocated and reserved bytes and bytes per site label
        long[] allocated = new long[n];
        long[] reserved = new long[n];
        List<Map<String, Long>> byLabel = new ArrayList<>();
        long res = 0;
        int ooms = 0;
        for (int i = 0; i < n; i++) {
            TraceEntry e = trace.get(i);
            if (e.action() == TraceAction.SEGMENT_ALLOC) {
                res += e.size();
            } else if (e.action() == TraceAction.SEGMENT_FREE) {
                res -= e.size();
            }
            ooms += e.action() == TraceAction.OOM ? 1 : 0;
            reserved[i] = res;
            Map<String, Long> sites = new HashMap<>();
            for (Object[] b : openAfter(trace, i).values()) {
                sites.merge((String) b[0], (long) b[3], Long::sum);
                allocated[i] += (long) b[3];
            }
            byLabel.add(sites);
        }
        int peak = 0;
        for (int i = 1; i < n; i++) {
            peak = allocated[i] > allocated[peak] ? i : peak;
        }
        int[] moments = {random.nextInt(n), random.nextInt(n), n - 1};
        for (int maxPoints : new int[] {37, 300, n}) {
            Timeline t =
                    new Timeline(trace, null, AllocatorConfig.defaults(), new Sites(), Map.of(), maxPoints, moments);
            assertThat(t.peakIndex).isEqualTo(peak);
            assertThat(t.peakAllocated).isEqualTo(allocated[peak]);
            Timeline.Sampled s = t.sample(3);
            List<Integer> points = Arrays.stream(s.index()).boxed().toList();
            assertThat(points).isSorted().doesNotHaveDuplicates().contains(peak);
            assertThat(s.index().length).isLessThanOrEqualTo(maxPoints + ooms);
            for (int i = 0; i < n; i++) {
                if (trace.get(i).action() == TraceAction.OOM) {
                    assertThat(points).contains(i);
                }
            }
            for (int p = 0; p < points.size(); p++) {
                int i = points.get(p);
                assertThat(s.allocated()[p]).as("allocated at point " + i).isEqualTo(allocated[i]);
                assertThat(Arrays.stream(s.stack()[p]).sum()).isEqualTo(allocated[i]);
                for (int c = 0; c < s.sites().length; c++) {
                    assertThat(s.stack()[p][c])
                            .as("site column " + c + " at point " + i)
                            .isEqualTo(byLabel.get(i).getOrDefault(t.sites.label(s.sites()[c]), 0L));
                }
                if (maxPoints == n) {
                    assertThat(s.reserved()[p]).isEqualTo(reserved[i]);
                }
            }
            for (int m : moments) {
                assertLifetimes(t, t.lifetimesAfter(m), openAfter(trace, m));
            }
            assertLifetimes(t, t.lifetimesAtPeak(), openAfter(trace, peak));
        }
    }

    /** The blocks open after entry {@code m}, by address: {site label, alloc entry, entry that frees it, bytes}. */
    private static Map<Long, Object[]> openAfter(List<TraceEntry> trace, int m) {
        Map<Long, Object[]> open = new HashMap<>();
        Map<Long, Object[]> then = null;
        for (int i = 0; i < trace.size(); i++) {
            TraceEntry e = trace.get(i);
            if (e.action() == TraceAction.ALLOC || e.action() == TraceAction.FREE_COMPLETED) {
                Object[] old = open.remove(e.addr());
                if (old != null) {
                    old[2] = i;
                }
                if (e.action() == TraceAction.ALLOC) {
                    open.put(e.addr(), new Object[] {Sites.label(e.frames()), i, -1, e.size()});
                }
            }
            if (i == m) {
                then = new HashMap<>(open);
            }
        }
        return then;
    }

    private static void assertLifetimes(Timeline t, Map<Long, int[]> walked, Map<Long, Object[]> recounted) {
        assertThat(walked).containsOnlyKeys(recounted.keySet());
        for (Map.Entry<Long, Object[]> b : recounted.entrySet()) {
            int[] w = walked.get(b.getKey());
            assertThat(t.sites.label(w[0])).isEqualTo(b.getValue()[0]);
            assertThat(w[1]).isEqualTo(b.getValue()[1]);
            assertThat(w[2]).as("freed at").isEqualTo(b.getValue()[2]);
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
