package io.gpumem.engine;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpumem.config.AllocatorConfig;
import io.gpumem.policy.PolicyRegistry;
import org.junit.jupiter.api.Test;

/**
 * A run's outcome as the tables show it and as rows compare: its mode, its reserved-per-allocated ratio, what
 * equality looks at (the decisions, not the time measured nor the allocator kept), and a relabelled copy that leaves
 * the outcome it came from as it was.
 */
class RunOutcomeTest {
    private static final long MIB = 1L << 20;

    @Test
    void aRowsModeSaysWhetherItIsASteadyStateRunAndOfHowManyPasses() {
        RunOutcome window = RunOutcome.builder().build();
        assertThat(window.steady()).isFalse();
        assertThat(window.mode()).isEqualTo("window");
        assertThat(window.modeLabel()).isEqualTo("window");
        assertThat(window.minCapacity()).as("not searched").isEqualTo(-1);
        assertThat(window.failedOp()).as("nothing failed").isEqualTo(-1);

        RunOutcome steady = RunOutcome.builder().warmUpPasses(3).build();
        assertThat(steady.steady()).isTrue();
        assertThat(steady.mode()).isEqualTo("steady");
        assertThat(steady.modeLabel())
                .as("the warm-up passes and the measured one")
                .isEqualTo("steady/4");
        assertThat(RunOutcome.builder().warmUpPasses(1).build().modeLabel()).isEqualTo("steady/2");
    }

    @Test
    void reservedPerAllocatedIsOneForARunThatAllocatedNothing() {
        assertThat(RunOutcome.builder().build().reservedPerAllocated()).isEqualTo(1.0);
        RunOutcome r = RunOutcome.builder()
                .peakAllocated(40 * MIB)
                .peakReserved(50 * MIB)
                .build();
        assertThat(r.reservedPerAllocated()).isEqualTo(1.25);
    }

    @Test
    void equalOutcomesDecidedTheSameWhateverTheirTimeOrWhatTheyKept() {
        RequestStream.Builder b = RequestStream.builder();
        b.free(b.alloc(MIB, 0, 0), 1);
        StreamRunner runner = new StreamRunner(b.build());
        RunOptions keep =
                RunOptions.builder(StreamRunner.ROOMY).keepAllocator(true).build();
        RunOutcome kept = runner.run(PolicyRegistry.exact(AllocatorConfig.defaults()), keep);
        RunOutcome plain = runner.run(
                PolicyRegistry.exact(AllocatorConfig.defaults()),
                RunOptions.builder(StreamRunner.ROOMY).build());
        assertThat(kept.allocator()).isNotNull();
        assertThat(plain.allocator()).isNull();
        RunOutcome retimed = plain.toBuilder().nsPerPair(12345.0).build();
        assertThat(kept).isEqualTo(plain).isEqualTo(retimed).hasSameHashCodeAs(retimed);

        // every decision counts, the step count and the first failure among them
        assertThat(plain.toBuilder().failedOp(3).build()).isNotEqualTo(plain);
        assertThat(plain.toBuilder().stepsCompleted(2).build()).isNotEqualTo(plain);
        assertThat(plain.toBuilder().warmUpPasses(1).build()).isNotEqualTo(plain);
        assertThat(plain.toBuilder().deviceMaps(1).build()).isNotEqualTo(plain);
        assertThat(plain.toBuilder().recorded(true).build()).isNotEqualTo(plain);
        assertThat(plain.toBuilder().label("max_split_size_mb:128").build()).isNotEqualTo(plain);
    }

    @Test
    void aRelabelledCopyLeavesTheOriginalAsItWas() {
        RunOutcome original = RunOutcome.builder()
                .label("")
                .policy("stitch")
                .capacity(80 * MIB)
                .peakAllocated(10 * MIB)
                .peakReserved(20 * MIB)
                .deviceAllocs(2)
                .deviceFrees(1)
                .retries(1)
                .ooms(0)
                .minCapacity(22 * MIB)
                .build();
        RunOutcome relabelled =
                original.toBuilder().label("recorded").recorded(true).build();
        assertThat(original.label()).isEmpty();
        assertThat(original.recorded()).isFalse();
        assertThat(relabelled.label()).isEqualTo("recorded");
        assertThat(relabelled.recorded()).isTrue();
        assertThat(relabelled.minCapacity()).isEqualTo(22 * MIB);
        assertThat(relabelled.policy()).isEqualTo("stitch");
        assertThat(original.toString())
                .isEqualTo("RunOutcome[stitch, capacity 83886080, peak allocated 10485760, peak reserved 20971520,"
                        + " device allocs 2, frees 1, retries 1, ooms 0, min capacity 23068672, maps 0]");
        assertThat(relabelled.toString()).startsWith("RunOutcome[stitch recorded (recorded), capacity 83886080");
    }
}
