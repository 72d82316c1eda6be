package io.gpumem.engine;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.gpumem.alloc.Pool;
import io.gpumem.history.BlockInfo;
import io.gpumem.history.BlockState;
import io.gpumem.history.Frame;
import io.gpumem.history.SegmentInfo;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Set;
import java.util.SplittableRandom;
import org.junit.jupiter.api.Test;

class RequestStreamTest {

    /** A random stream: allocs and frees of random live slots, a step now and then; some blocks left live. */
    static RequestStream random(long seed, int ops) {
        SplittableRandom rnd = new SplittableRandom(seed);
        RequestStream.Builder b = RequestStream.builder();
        List<Integer> live = new ArrayList<>();
        for (int i = 0; i < ops; i++) {
            int r = rnd.nextInt(100);
            if (r < 5) {
                b.step(i);
            } else if (r < 55 || live.isEmpty()) {
                live.add(b.alloc(1 + rnd.nextLong(1 << 20), rnd.nextInt(3), i));
            } else {
                int index = rnd.nextInt(live.size());
                b.free(live.get(index), i);
                live.set(index, live.getLast());
                live.removeLast();
            }
        }
        return b.build();
    }

    @Test
    void compactSlotsReuseTheSlotFreedLastAndNeverShareALiveOne() {
        long seed = new SplittableRandom().nextLong();
        System.out.println("RequestStreamTest seed=" + seed);
        RequestStream s = random(seed, 5_000);
        int[] compact = s.compactSlots();
        int[] byOriginal = new int[s.slots()];
        Set<Integer> liveCompact = new HashSet<>();
        int lastFreed = -1;
        for (int k = 0; k < s.length(); k++) {
            switch (s.op(k)) {
                case RequestStream.ALLOC -> {
                    assertThat(liveCompact.add(compact[k]))
                            .as("op %d reuses a live slot", k)
                            .isTrue();
                    if (lastFreed >= 0) {
                        assertThat(compact[k])
                                .as("op %d takes the slot freed last", k)
                                .isEqualTo(lastFreed);
                    }
                    byOriginal[s.slot(k)] = compact[k];
                    lastFreed = -1;
                }
                case RequestStream.FREE -> {
                    assertThat(compact[k]).isEqualTo(byOriginal[s.slot(k)]);
                    liveCompact.remove(compact[k]);
                    lastFreed = compact[k];
                }
                default -> assertThat(compact[k]).isEqualTo(-1);
            }
            assertThat(compact[k]).isLessThan(s.peakLiveBlocks());
        }
        assertThat(s.peakLiveBlocks()).isLessThan(s.allocs());
    }

    @Test
    void streamsAreTheAllocsAndStartStatesHandlesInUnsignedOrderOrInFirstUse() {
        // many handles, so that the builder's index of them passes from a search in order to a map
        long[] handles = new long[40];
        for (int i = 0; i < handles.length; i++) {
            handles[i] = (i % 2 == 0 ? -1L : 1L) * (1000 - 7L * i); // negative handles sort last, unsigned
        }
        for (boolean firstUse : new boolean[] {false, true}) {
            RequestStream.Builder b = RequestStream.builder(4).startState(List.of(startSegment(77)));
            if (firstUse) {
                b.streamsInFirstUseOrder();
            }
            List<Long> allocStreams = new ArrayList<>();
            for (int k = 0; k < 200; k++) {
                long h = handles[(k * 13) % handles.length];
                b.alloc(512, h, k);
                allocStreams.add(h);
                if (k % 3 == 0) {
                    b.free(1 + k, k); // the block just allocated (slot 0 is the start block)
                }
            }
            RequestStream s = b.build();
            List<Long> expected = new ArrayList<>(new LinkedHashSet<>(allocStreams));
            expected.add(77L);
            if (!firstUse) {
                expected.sort(Long::compareUnsigned);
            }
            assertThat(s.streams())
                    .as("first use %s", firstUse)
                    .containsExactly(
                            expected.stream().mapToLong(Long::longValue).toArray());
            int a = 0;
            for (int k = 0; k < s.length(); k++) {
                if (s.op(k) == RequestStream.ALLOC) {
                    assertThat(s.stream(k)).isEqualTo(allocStreams.get(a++));
                } else {
                    assertThat(s.streamIndex(k)).isZero();
                }
            }
            assertThatThrownBy(() -> b.alloc(512, 0, 0)).isInstanceOf(IllegalStateException.class);
        }
    }

    /** A 2 MiB segment on {@code stream} holding one live block (a start state's slot 0). */
    private static SegmentInfo startSegment(long stream) {
        return SegmentInfo.ofBlocks(
                0,
                0x7f0000000000L,
                stream,
                Pool.LARGE,
                false,
                List.of(BlockInfo.of(0x7f0000000000L, 2L << 20, 2L << 20, BlockState.ACTIVE_ALLOCATED)));
    }

    @Test
    void peakLiveBlocksIsTheMostSlotsLiveAfterAnyOp() {
        long seed = new SplittableRandom().nextLong();
        System.out.println("RequestStreamTest seed=" + seed);
        RequestStream s = random(seed, 3_000);
        int live = s.startBlocks();
        int peak = live;
        for (int k = 0; k < s.length(); k++) {
            live += s.op(k) == RequestStream.ALLOC ? 1 : s.op(k) == RequestStream.FREE ? -1 : 0;
            peak = Math.max(peak, live);
        }
        assertThat(s.peakLiveBlocks()).isEqualTo(peak);
        assertThat(s.requestSizes()).hasSize(s.length());
        assertThat(s.streamIndexes()).hasSize(s.length());
    }

    @Test
    void peakLiveBytesIsExactNearTheTopOfALongAndRefusesASumPastIt() {
        // three blocks of 2^61 live at once: 3 x 2^61 fits in a long, a fourth would wrap to a negative sum
        RequestStream.Builder fits = RequestStream.builder();
        int a = fits.alloc(1L << 61, 0, 0);
        fits.alloc(1L << 61, 0, 1);
        fits.free(a, 2);
        fits.alloc(1L << 61, 0, 3);
        fits.alloc(1L << 61, 0, 4);
        assertThat(fits.build().peakLiveBytes()).isEqualTo(3L << 61);

        RequestStream.Builder wraps = RequestStream.builder();
        for (int i = 0; i < 4; i++) {
            wraps.alloc(1L << 61, 0, i);
        }
        RequestStream s = wraps.build();
        assertThatThrownBy(s::peakLiveBytes)
                .isInstanceOf(ArithmeticException.class)
                .hasMessage("the requests live at op 3 add up to more than 9223372036854775807 bytes (2^63 - 1)");
    }

    @Test
    void aBalancedRangeFreesWhatItLeavesLiveInAllocationOrder() {
        long seed = new SplittableRandom().nextLong();
        System.out.println("RequestStreamTest seed=" + seed);
        RequestStream s = random(seed, 2_000);
        RequestStream all = s.balanced(0, s.length());
        assertThat(all.length()).isEqualTo(2 * all.allocs());
        assertThat(all.allocs()).isEqualTo(s.allocs());
        assertThat(all.steps()).isZero();
        List<Long> sizes = new ArrayList<>();
        List<Long> allSizes = new ArrayList<>();
        for (int k = 0; k < s.length(); k++) {
            if (s.op(k) == RequestStream.ALLOC) {
                sizes.add(s.size(k));
            }
            if (k < all.length() && all.op(k) == RequestStream.ALLOC) {
                allSizes.add(all.size(k));
                assertThat(all.stream(k)).isBetween(0L, 2L);
            }
        }
        assertThat(allSizes).isEqualTo(sizes);
        // the appended frees come last, in allocation (slot) order, and name blocks left live
        int appended = 0;
        int lastSlot = -1;
        for (int k = all.length() - 1; k >= 0 && all.entry(k) == -1; k--) {
            assertThat(all.op(k)).isEqualTo(RequestStream.FREE);
            assertThat(lastSlot < 0 || all.slot(k) < lastSlot).isTrue();
            lastSlot = all.slot(k);
            appended++;
        }
        assertThat(appended).isEqualTo(s.allocs() - (s.length() - s.allocs() - s.steps()));
        // balancing a balanced stream changes nothing
        RequestStream again = all.balanced(0, all.length());
        assertThat(again.compactSlots()).isEqualTo(all.compactSlots());
        assertThat(again.requestSizes()).isEqualTo(all.requestSizes());
    }

    @Test
    void aRangeThatFreesABlockFromBeforeItIsRefusedNamingTheOp() {
        RequestStream.Builder b = RequestStream.builder();
        int weights = b.alloc(100, 0, 0);
        b.step(1);
        int act = b.alloc(50, 0, 2);
        b.free(act, 3);
        b.free(weights, 4);
        RequestStream s = b.build();
        RequestStream step = s.balanced(1, 4);
        assertThat(step.length()).isEqualTo(2);
        assertThat(step.peakLiveBlocks()).isEqualTo(1);
        assertThatThrownBy(() -> s.balanced(1, 5))
                .isInstanceOf(IllegalArgumentException.class)
                .hasMessageContaining("op 4 (entry 4) frees a block allocated before op 1");
        assertThatThrownBy(() -> s.balanced(3, 9)).hasMessageContaining("outside");
    }

    /** A random stream with a start state, sites, times, empty_cache calls and entries that skip numbers. */
    private static RequestStream withEverything(long seed, int ops) {
        SplittableRandom rnd = new SplittableRandom(seed);
        List<SegmentInfo> start = List.of(
                SegmentInfo.ofBlocks(
                        0,
                        1L << 30,
                        7,
                        Pool.LARGE,
                        false,
                        List.of(
                                BlockInfo.of(1L << 30, 4L << 20, 4L << 20, BlockState.ACTIVE_ALLOCATED),
                                BlockInfo.of((1L << 30) + (4L << 20), 16L << 20, 0, BlockState.INACTIVE))),
                SegmentInfo.ofBlocks(
                        0,
                        2L << 30,
                        9,
                        Pool.LARGE,
                        false,
                        List.of(BlockInfo.of(2L << 30, 20L << 20, 20L << 20, BlockState.ACTIVE_ALLOCATED))));
        RequestStream.Builder b = RequestStream.builder().startState(start);
        List<List<Frame>> stacks = List.of(List.of(new Frame("a.py", 1, "f")), List.of(new Frame("b.py", 2, "g")));
        List<Integer> live = new ArrayList<>(List.of(0, 1));
        int entry = 0;
        for (int i = 0; i < ops; i++) {
            entry += 1 + rnd.nextInt(3);
            int r = rnd.nextInt(100);
            if (r < 5) {
                b.emptyCache(entry);
            } else if (r < 55 || live.isEmpty()) {
                live.add(b.alloc(1 + rnd.nextLong(1 << 20), rnd.nextInt(4), entry));
            } else {
                int index = rnd.nextInt(live.size());
                b.free(live.get(index), entry);
                live.set(index, live.getLast());
                live.removeLast();
            }
            if (rnd.nextBoolean()) {
                b.atSite(b.site(stacks.get(rnd.nextInt(stacks.size()))));
            }
            b.at(entry * 10L);
        }
        return b.build();
    }

    @Test
    void aPrefixIsTheFirstOpsFromTheSameStartWithSlotsSitesAndTimesKept() {
        long seed = new SplittableRandom().nextLong();
        System.out.println("RequestStreamTest seed=" + seed);
        RequestStream s = withEverything(seed, 3_000);
        SplittableRandom rnd = new SplittableRandom(seed);
        for (int ops : new int[] {0, 1, rnd.nextInt(s.length()), rnd.nextInt(s.length()), s.length()}) {
            RequestStream p = s.prefix(ops);
            assertThat(p.length()).as("seed %d, prefix %d", seed, ops).isEqualTo(ops);
            assertThat(p.startState()).isEqualTo(s.startState());
            assertThat(p.startBlocks()).isEqualTo(s.startBlocks());
            int allocs = 0;
            for (int k = 0; k < ops; k++) {
                assertThat(p.op(k)).as("seed %d, op %d", seed, k).isEqualTo(s.op(k));
                assertThat(p.slot(k)).as("seed %d, op %d", seed, k).isEqualTo(s.slot(k));
                assertThat(p.size(k)).isEqualTo(s.size(k));
                assertThat(p.entry(k)).isEqualTo(s.entry(k));
                assertThat(p.frames(k)).isEqualTo(s.frames(k));
                assertThat(p.time[k]).as("seed %d, op %d's time", seed, k).isEqualTo(s.time[k]);
                if (s.op(k) == RequestStream.ALLOC) {
                    assertThat(p.stream(k)).as("seed %d, op %d", seed, k).isEqualTo(s.stream(k));
                    allocs++;
                }
            }
            assertThat(p.allocs()).isEqualTo(allocs);
            assertThat(p.slots()).isEqualTo(s.startBlocks() + allocs);
            // the start state's streams stay in the table even when no alloc of the prefix uses them
            assertThat(p.streams()).contains(7L, 9L);
        }
        assertThat(s.prefix(s.length()).requestSizes()).isEqualTo(s.requestSizes());
        assertThatThrownBy(() -> s.prefix(-1)).hasMessageContaining("outside [0, " + s.length() + "]");
        assertThatThrownBy(() -> s.prefix(s.length() + 1)).hasMessageContaining("outside");
    }

    @Test
    void aPrefixKeepsTheStreamsInOrderOfFirstUseWhenTheStreamHadThem() {
        RequestStream.Builder b = RequestStream.builder().streamsInFirstUseOrder();
        b.alloc(100, 9, 0);
        b.alloc(100, 3, 1);
        b.alloc(100, 5, 2);
        RequestStream s = b.build();
        assertThat(s.streams()).containsExactly(9, 3, 5);
        assertThat(s.prefix(2).streams()).containsExactly(9, 3);
        RequestStream.Builder sorted = RequestStream.builder();
        sorted.alloc(100, 9, 0);
        sorted.alloc(100, 3, 1);
        assertThat(sorted.build().prefix(2).streams()).containsExactly(3, 9);
    }

    @Test
    void opsThroughAnEntryCountTheOpsOfEntriesUpToIt() {
        long seed = new SplittableRandom().nextLong();
        System.out.println("RequestStreamTest seed=" + seed);
        RequestStream s = withEverything(seed, 500);
        int last = s.entry(s.length() - 1);
        for (int e = -1; e <= last + 1; e++) {
            int expected = 0;
            while (expected < s.length() && s.entry(expected) <= e) {
                expected++;
            }
            assertThat(s.opsThroughEntry(e)).as("seed %d, entry %d", seed, e).isEqualTo(expected);
        }
        assertThat(s.opsThroughEntry(Integer.MAX_VALUE)).isEqualTo(s.length());
    }
}
