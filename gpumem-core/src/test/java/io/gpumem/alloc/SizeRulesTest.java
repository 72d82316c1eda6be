package io.gpumem.alloc;

import io.gpumem.config.AllocatorConfig;
import org.junit.jupiter.api.Test;

import java.util.Arrays;

import static org.assertj.core.api.Assertions.assertThat;

/** Golden values of allocator.md §1.2 (round_size with power-of-two divisions) and §1.5 (segment sizes). */
class SizeRulesTest {
    private static final long MiB = 1L << 20;

    private static AllocatorConfig divisions(int d) {
        int[] t = new int[AllocatorConfig.ROUNDUP_INTERVALS];
        Arrays.fill(t, d);
        return AllocatorConfig.defaults().toBuilder().roundupPower2Divisions(t).build();
    }

    @Test
    void roundSizeWorkedExamples() {
        AllocatorConfig d4 = divisions(4);
        assertThat(AllocatorCore.roundSize(1200, d4)).isEqualTo(1536);
        assertThat(AllocatorCore.roundupPower2NextDivision(1200, 4)).isEqualTo(1280);
        assertThat(AllocatorCore.roundSize(1_200_000, d4)).isEqualTo(1_310_720);
        assertThat(AllocatorCore.roundSize(3000, d4)).isEqualTo(3072);
        assertThat(AllocatorCore.roundSize(300 * MiB + 1, divisions(2))).isEqualTo(384 * MiB);
        assertThat(AllocatorCore.roundSize(1 << 20, d4)).isEqualTo(1 << 20);
    }

    @Test
    void defaultRoundingIsTo512WithMinimum512() {
        AllocatorConfig d = AllocatorConfig.defaults();
        assertThat(AllocatorCore.roundSize(1, d)).isEqualTo(512);
        assertThat(AllocatorCore.roundSize(511, d)).isEqualTo(512);
        assertThat(AllocatorCore.roundSize(512, d)).isEqualTo(512);
        assertThat(AllocatorCore.roundSize(513, d)).isEqualTo(1024);
        assertThat(AllocatorCore.roundSize(1_048_577, d)).isEqualTo(1_049_088);
        // divisions 1 means plain rounding in 2.1+
        assertThat(AllocatorCore.roundSize(1_200_000, divisions(1))).isEqualTo(1_200_128);
    }

    @Test
    void roundingNeverCrossesThePoolBoundary() {
        for (int d : new int[] {2, 4, 8, 16}) {
            AllocatorConfig c = divisions(d);
            for (long n = 1; n <= MiB; n += 4093) {
                assertThat(AllocatorCore.roundSize(n, c)).isLessThanOrEqualTo(MiB).isGreaterThanOrEqualTo(n)
                        .matches(v -> v % 512 == 0);
            }
        }
    }

    @Test
    void allocationSizeTable() {
        long[][] rows = {{512, 2 * MiB}, {1024, 2 * MiB}, {MiB, 2 * MiB}, {1_049_088, 20 * MiB},
                {9 * MiB, 20 * MiB}, {10_485_760, 10 * MiB}, {25_000_448, 25_165_824}, {250_000_384, 251_658_240}};
        for (long[] r : rows) {
            assertThat(AllocatorCore.allocationSize(r[0])).as("segment for %d", r[0]).isEqualTo(r[1]);
        }
    }
}
