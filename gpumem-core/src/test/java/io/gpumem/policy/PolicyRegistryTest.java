package io.gpumem.policy;

import static io.gpumem.testing.TestSizes.MiB;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.gpumem.alloc.CachingAllocator;
import io.gpumem.alloc.GpuAllocator;
import io.gpumem.device.SimulatedDevice;
import io.gpumem.plan.LifetimeProblem;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;

/** Parsing through the registry, what each factory declares, and registering a policy at run time. */
class PolicyRegistryTest {

    private static SimulatedDevice device() {
        return SimulatedDevice.builder().capacity(256 * MiB).build();
    }

    @Test
    void theBuiltInPoliciesAreRegisteredExactFirst() {
        assertThat(PolicyRegistry.names()).startsWith(PolicyRegistry.EXACT).contains("stitch", "planned");
        assertThat(PolicyRegistry.alternatives())
                .extracting(PolicyFactory::name)
                .doesNotContain(PolicyRegistry.EXACT)
                .contains("stitch", "planned");
        assertThat(PolicyRegistry.all()).allSatisfy(f -> assertThat(f.summary()).isNotBlank());
    }

    @Test
    void anUnknownNameListsTheRegisteredOnes() {
        assertThatThrownBy(() -> PolicySpec.parse("first-fit"))
                .isInstanceOf(IllegalArgumentException.class)
                .hasMessage("unknown policy 'first-fit' (known: " + String.join(", ", PolicyRegistry.names()) + ")");
    }

    @Test
    void optionsAreValidatedAtParseTime() {
        PolicySpec spec = PolicySpec.parse("pytorch:expandable_segments:True");
        assertThat(spec.name()).isEqualTo(PolicyRegistry.EXACT);
        assertThat(spec.options()).isEqualTo("expandable_segments:True");
        assertThat(spec.label()).isEqualTo("pytorch:expandable_segments:True");
        assertThat(spec.exact()).isTrue();
        assertThatThrownBy(() -> PolicySpec.parse("pytorch:no_such_key:1")).hasMessageStartingWith("policy pytorch: ");
        assertThatThrownBy(() -> PolicySpec.parse("stitch:x")).hasMessage("policy stitch takes no options, got 'x'");
        assertThat(PolicySpec.parse(" stitch ").label()).isEqualTo("stitch");
    }

    @Test
    void eachFactoryCreatesItsAllocator() {
        try (GpuAllocator a = PolicySpec.parse("pytorch").create(device())) {
            assertThat(a).isInstanceOf(CachingAllocator.class);
        }
        try (GpuAllocator a = PolicySpec.parse("stitch").create(device())) {
            assertThat(a.malloc(MiB)).isNotZero();
        }
    }

    @Test
    void plannedNeedsAProfileOrAStreamThatMarksSteps() {
        PolicySpec planned = PolicySpec.parse("planned");
        assertThat(planned.factory().needsProfile()).isTrue();
        assertThatThrownBy(() -> planned.create(device()))
                .isInstanceOf(IllegalStateException.class)
                .hasMessageContaining("needs a profile");

        // a profile of two buffers that overlap: planned serves both at their planned offsets
        LifetimeProblem profile = new LifetimeProblem(
                new long[] {0, 1}, new long[] {0, 1}, new long[] {3, 2}, new long[] {MiB, MiB}, 512);
        AtomicInteger built = new AtomicInteger();
        PreparedPolicy prepared = planned.prepare(StreamFacts.of(false, () -> {
            built.incrementAndGet();
            return profile;
        }));
        for (int run = 0; run < 2; run++) {
            try (GpuAllocator a = prepared.create(device())) {
                long x = a.malloc(MiB);
                long y = a.malloc(MiB);
                assertThat(Math.abs(y - x)).isEqualTo(MiB);
                assertThat(a.stats().extra("num_planned_requests")).isEqualTo(2);
            }
        }
        assertThat(built).as("the profile is built once, for every run").hasValue(1);

        // a stream that marks steps: the first step is profiled online, the second served from its plan
        try (GpuAllocator a = planned.prepare(StreamFacts.of(true, null)).create(device())) {
            for (int step = 0; step < 2; step++) {
                if (step > 0) {
                    a.internals().stepBoundary();
                }
                long x = a.malloc(MiB);
                a.free(a.malloc(2 * MiB));
                a.free(x);
            }
            assertThat(a.stats().extra("num_plans")).isEqualTo(1);
            assertThat(a.stats().extra("num_planned_requests")).isEqualTo(2);
        }
    }

    @Test
    void aPolicyRegisteredAtRunTimeIsParsedAndListedUntilRemoved() {
        PolicyFactory toy =
                PolicyFactory.simple("toy-exact", "the exact allocator under another name", CachingAllocator::new);
        PolicyRegistry.register(toy);
        try {
            assertThat(PolicyRegistry.names()).endsWith("toy-exact");
            assertThat(PolicyRegistry.alternatives()).contains(toy);
            assertThat(PolicySpec.parse("toy-exact").factory()).isSameAs(toy);
            assertThatThrownBy(() -> PolicyRegistry.register(toy)).hasMessageContaining("registered twice");
        } finally {
            assertThat(PolicyRegistry.unregister("toy-exact")).isTrue();
        }
        assertThat(PolicyRegistry.find("toy-exact")).isEmpty();
        assertThatThrownBy(() -> PolicyRegistry.unregister("stitch")).hasMessageContaining("built in");
    }
}
