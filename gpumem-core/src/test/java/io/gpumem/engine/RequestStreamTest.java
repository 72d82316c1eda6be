package io.gpumem.engine;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.util.ArrayList;
import java.util.HashSet;
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
}
