package io.gpumem.alloc;

import static io.gpumem.testing.TestSizes.MiB;
import static org.assertj.core.api.Assertions.assertThat;

import io.gpumem.config.AllocatorConfig;
import java.util.Arrays;
import org.junit.jupiter.api.Test;

/**
 * Golden values of the spec for every rule in {@link SizeRules}: allocator.md §1.2 (round_size with power-of-two divisions),
 * allocator.md §1.5 (segment sizes), §2.2 (pool choice and the oversize rules) and §2.3 (should_split), plus a check that the
 * derived {@code largestUnsplitRemainder} agrees with {@code shouldSplit} at its boundary.
 */
class SizeRulesTest {

    private static AllocatorConfig divisions(int d) {
        int[] t = new int[AllocatorConfig.ROUNDUP_INTERVALS];
        Arrays.fill(t, d);
        return AllocatorConfig.defaults().toBuilder().roundupPower2Divisions(t).build();
    }

    @Test
    void roundSizeWorkedExamples() {
        AllocatorConfig d4 = divisions(4);
        assertThat(SizeRules.roundSize(1200, d4)).isEqualTo(1536);
        assertThat(SizeRules.roundupPower2NextDivision(1200, 4)).isEqualTo(1280);
        assertThat(SizeRules.roundSize(1_200_000, d4)).isEqualTo(1_310_720);
        assertThat(SizeRules.roundSize(3000, d4)).isEqualTo(3072);
        assertThat(SizeRules.roundSize(300 * MiB + 1, divisions(2))).isEqualTo(384 * MiB);
        assertThat(SizeRules.roundSize(1 << 20, d4)).isEqualTo(1 << 20);
    }

    @Test
    void defaultRoundingIsTo512WithMinimum512() {
        AllocatorConfig d = AllocatorConfig.defaults();
        assertThat(SizeRules.roundSize(1, d)).isEqualTo(512);
        assertThat(SizeRules.roundSize(511, d)).isEqualTo(512);
        assertThat(SizeRules.roundSize(512, d)).isEqualTo(512);
        assertThat(SizeRules.roundSize(513, d)).isEqualTo(1024);
        assertThat(SizeRules.roundSize(1_048_577, d)).isEqualTo(1_049_088);
        // divisions 1 means plain rounding in 2.1+
        assertThat(SizeRules.roundSize(1_200_000, divisions(1))).isEqualTo(1_200_128);
    }

    @Test
    void roundingNeverCrossesThePoolBoundary() {
        for (int d : new int[] {2, 4, 8, 16}) {
            AllocatorConfig c = divisions(d);
            for (long n = 1; n <= MiB; n += 4093) {
                assertThat(SizeRules.roundSize(n, c))
                        .isLessThanOrEqualTo(MiB)
                        .isGreaterThanOrEqualTo(n)
                        .matches(v -> v % 512 == 0);
            }
        }
    }

    @Test
    void allocationSizeTable() {
        long[][] rows = {
            {512, 2 * MiB},
            {1024, 2 * MiB},
            {MiB, 2 * MiB},
            {1_049_088, 20 * MiB},
            {9 * MiB, 20 * MiB},
            {10_485_760, 10 * MiB},
            {25_000_448, 25_165_824},
            {250_000_384, 251_658_240}
        };
        for (long[] r : rows) {
            assertThat(SizeRules.allocationSize(r[0]))
                    .as("segment for %d", r[0])
                    .isEqualTo(r[1]);
        }
    }

    @Test
    void poolChoiceIsByRoundedSizeUpTo1MiB() {
        assertThat(SizeRules.poolFor(512)).isEqualTo(Pool.SMALL);
        assertThat(SizeRules.poolFor(MiB)).isEqualTo(Pool.SMALL);
        assertThat(SizeRules.poolFor(MiB + 512)).isEqualTo(Pool.LARGE);
        // a request of 1 MiB + 1 byte rounds past the boundary
        assertThat(SizeRules.poolFor(SizeRules.roundSize(MiB + 1, AllocatorConfig.defaults())))
                .isEqualTo(Pool.LARGE);
        assertThat(SizeRules.expandablePageSize(Pool.SMALL)).isEqualTo(2 * MiB);
        assertThat(SizeRules.expandablePageSize(Pool.LARGE)).isEqualTo(20 * MiB);
    }

    @Test
    void oversizeRulesOfGetFreeBlock() {
        long maxSplit = 100 * MiB;
        long slack = 20 * MiB;
        // a request below max_split_size never takes an oversize block
        assertThat(SizeRules.rejectsCachedBlock(50 * MiB, 100 * MiB, maxSplit, slack))
                .isTrue();
        assertThat(SizeRules.rejectsCachedBlock(50 * MiB, 100 * MiB - 512, maxSplit, slack))
                .isFalse();
        // an oversize request takes an oversize block only within the slack
        assertThat(SizeRules.rejectsCachedBlock(200 * MiB, 220 * MiB - 512, maxSplit, slack))
                .isFalse();
        assertThat(SizeRules.rejectsCachedBlock(200 * MiB, 220 * MiB, maxSplit, slack))
                .isTrue();
        // unlimited max_split_size: nothing is oversize
        assertThat(SizeRules.rejectsCachedBlock(MiB, 1L << 40, AllocatorConfig.UNLIMITED, slack))
                .isFalse();
        assertThat(SizeRules.isOversize(maxSplit, maxSplit)).isTrue();
        assertThat(SizeRules.isOversize(maxSplit - 1, maxSplit)).isFalse();
    }

    @Test
    void shouldSplitWorkedExamples() {
        long unlimited = AllocatorConfig.UNLIMITED;
        // small pool: any remainder of at least 512 bytes
        assertThat(SizeRules.shouldSplit(512, 1024, Pool.SMALL, false, unlimited))
                .isTrue();
        assertThat(SizeRules.shouldSplit(0, 2 * MiB, Pool.SMALL, false, unlimited))
                .isFalse();
        // large pool: strictly more than 1 MiB, and the 19.5 MiB request keeps its 0.5 MiB remainder
        assertThat(SizeRules.shouldSplit(MiB, 19 * MiB, Pool.LARGE, false, unlimited))
                .isFalse();
        assertThat(SizeRules.shouldSplit(MiB + 512, 19 * MiB, Pool.LARGE, false, unlimited))
                .isTrue();
        assertThat(SizeRules.shouldSplit(MiB / 2, 39 * MiB / 2, Pool.LARGE, false, unlimited))
                .isFalse();
        // large pool, oversize request: never split
        assertThat(SizeRules.shouldSplit(50 * MiB, 150 * MiB, Pool.LARGE, false, 100 * MiB))
                .isFalse();
        // expandable segments on: the small-pool rule for every block, max_split_size ignored
        assertThat(SizeRules.shouldSplit(512, 150 * MiB, Pool.LARGE, true, 100 * MiB))
                .isTrue();
    }

    @Test
    void largestUnsplitRemainderIsTheBoundaryOfShouldSplit() {
        for (Pool pool : Pool.values()) {
            for (boolean expandable : new boolean[] {false, true}) {
                for (long maxSplit : new long[] {AllocatorConfig.UNLIMITED, 100 * MiB}) {
                    for (long rounded : new long[] {512, MiB, 30 * MiB, 150 * MiB}) {
                        long keep = SizeRules.largestUnsplitRemainder(rounded, pool, expandable, maxSplit);
                        String what =
                                pool + " expandable=" + expandable + " maxSplit=" + maxSplit + " rounded=" + rounded;
                        if (keep < 0) {
                            assertThat(SizeRules.shouldSplit(1L << 40, rounded, pool, expandable, maxSplit))
                                    .as(what)
                                    .isFalse();
                        } else {
                            assertThat(SizeRules.shouldSplit(keep, rounded, pool, expandable, maxSplit))
                                    .as(what)
                                    .isFalse();
                            assertThat(SizeRules.shouldSplit(keep + 1, rounded, pool, expandable, maxSplit))
                                    .as(what)
                                    .isTrue();
                        }
                    }
                }
            }
        }
    }

    @Test
    void anOversizeRequestKeepsEveryRemainderAndASmallerOneSplitsAboveOneMiB() {
        long maxSplit = 64 * MiB;
        // a request of exactly max_split_size is oversize: nothing is split off it in the large pool
        assertThat(SizeRules.largestUnsplitRemainder(maxSplit, Pool.LARGE, false, maxSplit))
                .isEqualTo(-1);
        assertThat(SizeRules.shouldSplit(8 * MiB, maxSplit, Pool.LARGE, false, maxSplit))
                .isFalse();
        // one block less is not: remainders up to 1 MiB stay, larger ones split
        long below = maxSplit - SizeRules.MIN_BLOCK_SIZE;
        long kept = SizeRules.largestUnsplitRemainder(below, Pool.LARGE, false, maxSplit);
        assertThat(kept).isEqualTo(SizeRules.SMALL_SIZE);
        assertThat(SizeRules.shouldSplit(kept, below, Pool.LARGE, false, maxSplit))
                .isFalse();
        assertThat(SizeRules.shouldSplit(kept + SizeRules.MIN_BLOCK_SIZE, below, Pool.LARGE, false, maxSplit))
                .isTrue();
    }

    @Test
    void aDivisionFinerThanThePowerOfTwoBelowRoundsToTheNextPowerOfTwo() {
        // roundup_power2_next_division: when the power of two below the size has fewer bytes than divisions, the
        // division step is 0 and PyTorch rounds to the next power of two
        assertThat(SizeRules.roundupPower2NextDivision(5, 8)).isEqualTo(8);
        assertThat(SizeRules.roundupPower2NextDivision(3, 4)).isEqualTo(4);
        assertThat(SizeRules.roundupPower2NextDivision(6, 2)).isEqualTo(6); // step 2: 6 is on a division
        assertThat(SizeRules.roundupPower2NextDivision(7, 2)).isEqualTo(8);
    }
}
