package io.gpumem.engine;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.Arrays;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * The warm-up's stream takes the paths its comment promises (so that C2's first compilation of the allocator has
 * seen them): failed requests, retries and a capacity search under each configuration, oversize requests, mapped
 * pages under expandable segments; and it is the same every time.
 */
class AllocatorWarmUpTest {

    @Test
    void takesTheOutOfMemoryOversizeAndExpandablePaths() {
        List<RunOutcome> outcomes = AllocatorWarmUp.run();

        assertThat(outcomes).hasSize(AllocatorWarmUp.CONFIGURATIONS.length);
        for (RunOutcome o : outcomes) {
            // the compare run fails requests after a retry, and the search probes below its answer fail too
            assertThat(o.ooms()).isPositive();
            assertThat(o.retries()).isPositive();
            assertThat(o.minCapacity()).isGreaterThan(o.capacity()).isLessThan(o.peakAllocated() * 8);
        }
        // max_split_size_mb:128 sees requests above its limit, and they change its answer
        RequestStream stream = AllocatorWarmUp.trainingStream(12, 0x5EEDL);
        assertThat(Arrays.stream(stream.size, 0, stream.length).max().orElseThrow())
                .isGreaterThan(128L << 20);
        assertThat(outcomes.get(1).minCapacity()).isNotEqualTo(outcomes.get(0).minCapacity());
        // expandable segments map pages, the default configuration never does
        assertThat(outcomes.get(2).deviceMaps()).isPositive();
        assertThat(outcomes.get(0).deviceMaps()).isZero();
    }

    @Test
    void isTheSameEveryTime() {
        assertThat(AllocatorWarmUp.run()).isEqualTo(AllocatorWarmUp.run());
    }

    @Test
    void startsOnlyForLargeInputs() throws InterruptedException {
        assertThat(AllocatorWarmUp.startFor(AllocatorWarmUp.FROM_INPUT_BYTES - 1))
                .isNull();
        Thread t = AllocatorWarmUp.startFor(AllocatorWarmUp.FROM_INPUT_BYTES);
        assertThat(t).isNotNull();
        assertThat(t.isDaemon()).isTrue();
        // waited for, so that its simulated devices' events cannot reach a later test's Flight Recorder recording
        t.join(60_000);
        assertThat(t.isAlive()).isFalse();
    }
}
