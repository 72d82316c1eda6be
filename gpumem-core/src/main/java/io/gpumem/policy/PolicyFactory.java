package io.gpumem.policy;

import io.gpumem.alloc.GpuAllocator;
import io.gpumem.device.Device;
import java.util.Objects;
import java.util.function.Function;

/**
 * How one named allocation policy is made: what it is called, whether it takes options (validated when a
 * {@link PolicySpec} is parsed, so a bad option fails before anything runs), what it needs to know about the
 * request stream, and how it becomes {@link GpuAllocator}s. {@link PolicyRegistry} holds one per policy.
 *
 * <p>Making an allocator has two stages because a policy may learn from the stream once and then serve many runs
 * of it (a capacity search runs one stream at a dozen capacities): {@link #prepare} sees the options and the
 * stream's {@link StreamFacts} once, the {@link PreparedPolicy} it returns creates one allocator per device. A
 * runner never needs to know which policy it runs: it hands every factory the same facts.
 */
public interface PolicyFactory {

    /** The name users type ({@code compare --policy NAME}); unique in the registry. */
    String name();

    /** One line saying what the policy does, for help texts and the list of known policies. */
    String summary();

    /** Whether {@code NAME:OPTIONS} is accepted; without options a factory rejects any option text. */
    default boolean takesOptions() {
        return false;
    }

    /**
     * Checks an option string at parse time; called only when {@link #takesOptions()} is true.
     *
     * @throws IllegalArgumentException naming what is wrong with {@code options}
     */
    default void checkOptions(String options) {}

    /**
     * Whether {@link #prepare} may read {@link StreamFacts#profile()} (a planning policy does, unless the stream
     * marks steps so that it can profile one online). A runner whose source has no profile to offer can refuse
     * such a policy up front.
     */
    default boolean needsProfile() {
        return false;
    }

    /**
     * Learns what the policy needs from the stream about to run (once per stream) and returns what creates its
     * allocators.
     *
     * @param options the validated option text ("" when none)
     */
    PreparedPolicy prepare(String options, StreamFacts facts);

    /** A policy without options that needs nothing from the stream: it only creates an allocator per device. */
    static PolicyFactory simple(String name, String summary, Function<Device, GpuAllocator> create) {
        Objects.requireNonNull(name, "name");
        Objects.requireNonNull(summary, "summary");
        Objects.requireNonNull(create, "create");
        return new PolicyFactory() {
            @Override
            public String name() {
                return name;
            }

            @Override
            public String summary() {
                return summary;
            }

            @Override
            public PreparedPolicy prepare(String options, StreamFacts facts) {
                return create::apply;
            }
        };
    }
}
