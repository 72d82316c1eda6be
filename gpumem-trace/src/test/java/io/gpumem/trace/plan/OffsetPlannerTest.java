package io.gpumem.trace.plan;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.gpumem.plan.LifetimeProblem;
import io.gpumem.plan.OffsetPlan;
import io.gpumem.plan.OffsetPlanner;
import io.gpumem.trace.TestTraces;
import io.gpumem.trace.io.ReadLimits;
import io.gpumem.trace.session.TraceSession;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import java.util.TreeMap;
import org.junit.jupiter.api.Test;

class OffsetPlannerTest {

    /** Independent check: sweep over time, keeping the live address ranges in a sorted map. */
    static void assertNoOverlap(OffsetPlan plan) {
        LifetimeProblem p = plan.problem();
        int n = p.buffers();
        List<long[]> events = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            if (p.placedSize(i) > 0) {
                events.add(new long[] {p.upper(i), 0, i});
                events.add(new long[] {p.lower(i), 1, i});
            }
        }
        events.sort((a, b) -> a[0] != b[0] ? Long.compare(a[0], b[0]) : Long.compare(a[1], b[1]));
        TreeMap<Long, Long> live = new TreeMap<>();
        long peak = 0;
        for (long[] e : events) {
            int i = (int) e[2];
            long off = plan.offset(i);
            long end = off + p.placedSize(i);
            if (e[1] == 0) {
                assertThat(live.remove(off)).isEqualTo(end);
                continue;
            }
            assertThat(off % p.alignment()).isZero();
            var below = live.floorEntry(off);
            var above = live.ceilingEntry(off);
            assertThat(below == null || below.getValue() <= off)
                    .as("buffer %d overlaps one below", p.id(i))
                    .isTrue();
            assertThat(above == null || above.getKey() >= end)
                    .as("buffer %d overlaps one above", p.id(i))
                    .isTrue();
            live.put(off, end);
            peak = Math.max(peak, end);
        }
        assertThat(plan.plannedPeak()).isEqualTo(peak);
        assertThat(plan.plannedPeak()).isGreaterThanOrEqualTo(plan.peakLive());
    }

    /**
     * A problem whose optimum equals its peak live bytes by construction: a width × time rectangle cut at random
     * (guillotine cuts in time or in address), every piece a buffer, so the strip is full at every moment.
     */
    static LifetimeProblem perfectTiling(Random r, int pieces) {
        List<long[]> rects = new ArrayList<>(); // {t0, t1, a0, a1} in units
        rects.add(new long[] {0, 64, 0, 64});
        while (rects.size() < pieces) {
            long[] c = rects.remove(r.nextInt(rects.size()));
            boolean time = r.nextBoolean();
            long lo = time ? c[0] : c[2];
            long hi = time ? c[1] : c[3];
            if (hi - lo < 2) {
                rects.add(c);
                continue;
            }
            long cut = lo + 1 + r.nextInt((int) (hi - lo - 1));
            rects.add(time ? new long[] {c[0], cut, c[2], c[3]} : new long[] {c[0], c[1], c[2], cut});
            rects.add(time ? new long[] {cut, c[1], c[2], c[3]} : new long[] {c[0], c[1], cut, c[3]});
        }
        int n = rects.size();
        long[] id = new long[n];
        long[] lower = new long[n];
        long[] upper = new long[n];
        long[] size = new long[n];
        for (int i = 0; i < n; i++) {
            long[] c = rects.get(i);
            id[i] = i;
            lower[i] = c[0];
            upper[i] = c[1];
            size[i] = (c[3] - c[2]) * 512;
        }
        return new LifetimeProblem(id, lower, upper, size, 512);
    }

    /**
     * The planner is a heuristic under a work budget (placing buffers at their least offset is NP-hard), so it does
     * not reach the optimum of every tiling: on seeds 1 to 150 it missed 4 of 3,000 (0.13%), the worst by 3 units of
     * the 64, and seed 38618499265754 (round 16) plans 70, 6 above. What it does promise, and what this holds it to:
     * a valid plan every time, the optimum on nearly all (at least 18 of 20 rounds: three misses in 20 would take a
     * miss rate some twenty times the measured one), and never more than a quarter above it.
     */
    @Test
    void reachesTheOptimumOfNearlyAllPerfectTilings() {
        long seed = System.nanoTime();
        System.out.println("OffsetPlannerTest.reachesTheOptimumOfNearlyAllPerfectTilings seed " + seed);
        Random r = new Random(seed);
        int optimal = 0;
        for (int round = 0; round < 20; round++) {
            LifetimeProblem p = perfectTiling(r, 10 + r.nextInt(50));
            assertThat(p.peakLive()).isEqualTo(64 * 512);
            OffsetPlan plan = new OffsetPlanner(5_000, 400, 1.0).plan(p);
            assertNoOverlap(plan);
            assertThat(plan.plannedPeak())
                    .as("seed %d round %d (%s)", seed, round, plan.method())
                    .isLessThanOrEqualTo(64 * 512 + 64 * 512 / 4);
            optimal += plan.plannedPeak() == 64 * 512 ? 1 : 0;
        }
        assertThat(optimal).as("seed %d: rounds planned at the optimum", seed).isGreaterThanOrEqualTo(18);
    }

    @Test
    void randomProblemsGetValidPlansAtOrAboveTheBound() {
        long seed = System.nanoTime();
        System.out.println("OffsetPlannerTest.randomProblemsGetValidPlansAtOrAboveTheBound seed " + seed);
        Random r = new Random(seed);
        for (int round = 0; round < 30; round++) {
            int n = 1 + r.nextInt(300);
            long[] id = new long[n];
            long[] lower = new long[n];
            long[] upper = new long[n];
            long[] size = new long[n];
            for (int i = 0; i < n; i++) {
                id[i] = i;
                lower[i] = r.nextInt(200);
                upper[i] = lower[i] + r.nextInt(40); // some never live
                size[i] = 1L + r.nextInt(1 << 20);
            }
            OffsetPlan plan = new OffsetPlanner(50, 20).plan(new LifetimeProblem(id, lower, upper, size, 512));
            assertNoOverlap(plan);
        }
    }

    @Test
    void traceBuffersFollowTheirAllocAndFreeEntries() {
        var trace = io.gpumem.trace.io.TraceReaders.read(TestTraces.file("tiny-forward.pickle"));
        LifetimeProblem p = PlanFiles.ofTrace(trace, TraceSession.busiestDevice(trace), 512);
        assertThat(p.buffers()).isEqualTo(36);
        for (int i = 0; i < p.buffers(); i++) {
            assertThat(p.lower(i)).isLessThan(p.upper(i));
            assertThat(p.placedSize(i) % 512).isZero();
            assertThat(p.placedSize(i)).isGreaterThanOrEqualTo(p.size(i));
        }
        OffsetPlan plan = new OffsetPlanner().plan(p);
        assertNoOverlap(plan);
        assertThat(plan.ratio()).isLessThanOrEqualTo(1.001);
    }

    @Test
    void sharedLifetimeProblemIsPlannedAtItsBound() {
        LifetimeProblem p = PlanFiles.read(TestTraces.file("pangu13b-lifetimes.csv"), ReadLimits.DEFAULT, 512);
        assertThat(p.buffers()).isEqualTo(14_695);
        OffsetPlan plan = new OffsetPlanner().plan(p);
        assertNoOverlap(plan);
        assertThat(plan.ratio()).isLessThanOrEqualTo(1.001);
    }

    @Test
    void aLooseTargetStopsAtTheFirstOrderThatMeetsIt() {
        long seed = System.nanoTime();
        System.out.println("OffsetPlannerTest.aLooseTargetStopsAtTheFirstOrderThatMeetsIt seed " + seed);
        Random r = new Random(seed);
        for (int round = 0; round < 20; round++) {
            LifetimeProblem p = perfectTiling(r, 10 + r.nextInt(50));
            // Any plan is within n × bound, so the first stage (the skyline descent) meets a target of n and
            // nothing follows.
            OffsetPlan loose = new OffsetPlanner(5_000, 400, p.buffers()).plan(p);
            assertNoOverlap(loose);
            assertThat(loose.method()).as("seed %d round %d", seed, round).startsWith("skyline, ");
            assertThat(loose.improvementRounds()).isZero();
        }
        assertThatThrownBy(() -> new OffsetPlanner(10, 10, 0.999)).isInstanceOf(IllegalArgumentException.class);
        assertThatThrownBy(() -> new OffsetPlanner(10, 10, Double.NaN)).isInstanceOf(IllegalArgumentException.class);
    }
}
