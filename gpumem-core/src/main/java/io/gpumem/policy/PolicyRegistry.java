package io.gpumem.policy;

import io.gpumem.alloc.CachingAllocator;
import io.gpumem.config.AllocatorConfig;
import io.gpumem.config.ConfigException;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;

/**
 * Every allocation policy gpumem can run, by name: the one place a policy name means something. Runners, commands
 * and reports look policies up here and treat them all alike (through {@link PolicyFactory} and
 * {@link io.gpumem.alloc.GpuAllocator}); none compares a policy name or tests an allocator's class. Adding a policy
 * is one class (the allocator, with its factory) plus one line in {@link #BUILT_IN}.
 *
 * <p>Order is registration order: the built-in policies first ({@code pytorch}, the PyTorch-exact caching
 * allocator, always first), then any registered at run time by {@link #register} (an extension, or a test's toy
 * policy). Reads are lock-free over an immutable map; registration replaces the map under the class lock.
 */
public final class PolicyRegistry {

    /** The name of the PyTorch-exact caching allocator's policy, the baseline every other policy is compared to. */
    public static final String EXACT = "pytorch";

    private static final List<PolicyFactory> BUILT_IN = List.of(
            new ExactPolicyFactory(),
            PolicyFactory.simple(
                    StitchAllocator.NAME,
                    "online defragmentation on virtual memory: best fit in per-stream "
                            + "arenas, free physical pages stitched under the block that needs them",
                    StitchAllocator::new),
            PlannedAllocator.factory(),
            RmmPoolAllocator.factory());

    private static volatile Map<String, PolicyFactory> factories = index(BUILT_IN);

    private PolicyRegistry() {}

    private static Map<String, PolicyFactory> index(List<PolicyFactory> list) {
        Map<String, PolicyFactory> m = new LinkedHashMap<>();
        for (PolicyFactory f : list) {
            if (m.putIfAbsent(f.name(), f) != null) {
                throw new IllegalArgumentException("policy " + f.name() + " is registered twice");
            }
        }
        return m;
    }

    /** The registered names, in registration order. */
    public static List<String> names() {
        return List.copyOf(factories.keySet());
    }

    /** The registered factories, in registration order. */
    public static List<PolicyFactory> all() {
        return List.copyOf(factories.values());
    }

    /** Every registered policy except the exact allocator's: what a table adds beside the configurations. */
    public static List<PolicyFactory> alternatives() {
        List<PolicyFactory> out = new ArrayList<>(all());
        out.removeIf(f -> isExact(f.name()));
        return out;
    }

    /** The factory called {@code name}, if one is registered. */
    public static Optional<PolicyFactory> find(String name) {
        return Optional.ofNullable(factories.get(name));
    }

    /**
     * The factory called {@code name}.
     *
     * @throws IllegalArgumentException naming the unknown policy and listing the registered ones
     */
    public static PolicyFactory get(String name) {
        PolicyFactory f = factories.get(name);
        if (f == null) {
            throw new IllegalArgumentException(
                    "unknown policy '" + name + "' (known: " + String.join(", ", names()) + ")");
        }
        return f;
    }

    /** Whether {@code name} is the PyTorch-exact allocator's policy ({@link #EXACT}). */
    public static boolean isExact(String name) {
        return EXACT.equals(name);
    }

    /**
     * The exact allocator's policy under a configuration value, ready for any stream: what a what-if of
     * configurations runs (the recorded configuration of a trace may have no string form to parse).
     */
    public static PreparedPolicy exact(AllocatorConfig config) {
        Objects.requireNonNull(config, "config");
        return device -> new CachingAllocator(device, config);
    }

    /**
     * Registers a policy after the built-in ones (an extension, or a test's toy policy).
     *
     * @throws IllegalArgumentException when a policy of that name is registered already
     */
    public static synchronized void register(PolicyFactory factory) {
        Objects.requireNonNull(factory, "factory");
        List<PolicyFactory> list = new ArrayList<>(factories.values());
        list.add(factory);
        factories = index(list);
    }

    /**
     * Removes a policy registered by {@link #register}; returns whether it was registered. Built-in policies
     * cannot be removed.
     */
    public static synchronized boolean unregister(String name) {
        if (BUILT_IN.stream().anyMatch(f -> f.name().equals(name))) {
            throw new IllegalArgumentException("policy " + name + " is built in");
        }
        List<PolicyFactory> list = new ArrayList<>(factories.values());
        boolean removed = list.removeIf(f -> f.name().equals(name));
        factories = index(list);
        return removed;
    }

    /**
     * Policy {@code pytorch[:CONF]}: the PyTorch-exact {@link CachingAllocator} under a
     * {@code PYTORCH_CUDA_ALLOC_CONF} string (PyTorch's defaults when empty), parsed when the spec is.
     */
    private static final class ExactPolicyFactory implements PolicyFactory {
        @Override
        public String name() {
            return EXACT;
        }

        @Override
        public String summary() {
            return "PyTorch's CUDA caching allocator, decision for decision; options: a PYTORCH_CUDA_ALLOC_CONF string";
        }

        @Override
        public boolean takesOptions() {
            return true;
        }

        @Override
        public void checkOptions(String options) {
            try {
                AllocatorConfig.parse(options);
            } catch (ConfigException e) {
                throw new IllegalArgumentException("policy " + EXACT + ": " + e.getMessage(), e);
            }
        }

        @Override
        public PreparedPolicy prepare(String options, StreamFacts facts) {
            return exact(AllocatorConfig.parse(options));
        }
    }
}
