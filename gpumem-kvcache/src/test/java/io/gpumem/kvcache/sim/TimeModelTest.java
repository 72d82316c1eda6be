package io.gpumem.kvcache.sim;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.assertj.core.api.Assertions.within;

import org.junit.jupiter.api.Test;

/**
 * The step-time formula of {@link TimeModel}, worked out by hand on its documented defaults (Llama-3-8B in fp16 on
 * one H100): 16 GB of weights read at 3,350 GB/s, 40 µs per prefill token, 25 µs per decode token, 128 KiB of KV
 * per token; each tier's bandwidth and latency; and every setting's range.
 */
class TimeModelTest {

    @Test
    void aStepCostsTheWeightsReadOnceTheTokensComputeAndTheContextRead() {
        TimeModel t = TimeModel.defaults();
        double weights = 16e9 / 3.35e6; // bytes / (GB/s x 1e3) = µs: 4,776.1 µs
        assertThat(t.computeUs(0, 0, 0)).isCloseTo(weights, within(1e-9));
        assertThat(t.computeUs(100, 0, 0)).isCloseTo(weights + 100 * 40, within(1e-9));
        assertThat(t.computeUs(0, 5, 0)).isCloseTo(weights + 5 * 25, within(1e-9));
        assertThat(t.computeUs(0, 0, 1000)).isCloseTo(weights + 1000 * 131_072 / 3.35e6, within(1e-9));
        assertThat(t.computeUs(100, 5, 1000)).isCloseTo(weights + 4000 + 125 + 1000 * 131_072 / 3.35e6, within(1e-9));
    }

    @Test
    void eachTierHasItsLinkAndLatency() {
        TimeModel t = TimeModel.defaults();
        assertThat(t.transferUs(1000, 50))
                .as("1,000 tokens of 128 KiB over 50 GB/s")
                .isCloseTo(2621.44, within(1e-9));
        assertThat(t.transferUs(0, 7)).isZero();
        assertThat(t.bandwidth("host")).isEqualTo(50);
        assertThat(t.bandwidth("disk")).isEqualTo(7);
        assertThat(t.bandwidth("remote")).isEqualTo(12.5);
        assertThat(t.latency("host")).isZero();
        assertThat(t.latency("disk")).isEqualTo(100);
        assertThat(t.latency("remote")).isEqualTo(200);
    }

    @Test
    void bandwidthsAndBytesPerTokenMustBePositiveAndTimesNotNegative() {
        double[] ok = {16e9, 131_072, 40, 25, 3350, 50, 7, 100, 12.5, 200};
        assertThat(model(ok)).isEqualTo(TimeModel.defaults());
        assertThat(model(with(ok, 0, 0))).as("no weights to read").isNotNull();
        assertThat(model(with(with(with(ok, 2, 0), 3, 0), 7, 0)))
                .as("free compute and lookups")
                .isNotNull();
        int[] positive = {1, 4, 5, 6, 8};
        for (int i : positive) {
            int at = i;
            assertThatThrownBy(() -> model(with(ok, at, 0)))
                    .as("setting %d at 0", at)
                    .isInstanceOf(IllegalArgumentException.class)
                    .hasMessageContaining("must be a positive number, got " + (at == 1 ? "0" : "0.0"));
        }
        // each refusal names its figure, the first out of range, and the value it got
        String[] names = {
            "weightBytes",
            "kvBytesPerToken",
            "prefillUsPerToken",
            "decodeUsPerToken",
            "hbmGBps",
            "hostGBps",
            "diskGBps",
            "diskLatencyUs",
            "netGBps",
            "netLatencyUs"
        };
        for (int i = 0; i < ok.length; i++) {
            int at = i;
            assertThatThrownBy(() -> model(with(ok, at, -2)))
                    .hasMessageStartingWith("time model: " + names[at] + " must be ")
                    .hasMessageEndingWith("got " + (at == 1 ? "-2" : "-2.0"));
        }
        assertThatThrownBy(() -> model(with(with(ok, 4, 0), 9, -1))).hasMessageContaining("hbmGBps");
        // an infinite bandwidth moves bytes in no time; an infinite time or weight is no step at all
        assertThat(model(with(ok, 4, Double.POSITIVE_INFINITY)).transferUs(1000, Double.POSITIVE_INFINITY))
                .isZero();
        for (int at : new int[] {0, 2, 3, 7, 9}) {
            assertThatThrownBy(() -> model(with(ok, at, Double.POSITIVE_INFINITY)))
                    .hasMessageContaining("must be a finite number >= 0, got Infinity");
        }
        for (int i = 0; i < ok.length; i++) {
            int at = i;
            assertThatThrownBy(() -> model(with(ok, at, -1)))
                    .as("setting %d negative", at)
                    .isInstanceOf(IllegalArgumentException.class);
            if (at != 1) {
                assertThatThrownBy(() -> model(with(ok, at, Double.NaN)))
                        .as("setting %d NaN", at)
                        .isInstanceOf(IllegalArgumentException.class);
            }
        }
    }

    private static double[] with(double[] v, int i, double x) {
        double[] c = v.clone();
        c[i] = x;
        return c;
    }

    private static TimeModel model(double[] v) {
        return new TimeModel(v[0], (long) v[1], v[2], v[3], v[4], v[5], v[6], v[7], v[8], v[9]);
    }
}
