package io.gpumem.policy;

import io.gpumem.alloc.GpuAllocator;
import io.gpumem.device.Device;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;

/**
 * A policy as a user names it, {@code NAME[:OPTIONS]}, parsed through {@link PolicyRegistry}: the name must be
 * registered, and the options are checked by the policy's factory at parse time (only policies that take options
 * accept any; {@code pytorch[:CONF]} takes a {@code PYTORCH_CUDA_ALLOC_CONF} string).
 *
 * @param factory the registered policy
 * @param options its validated option text, "" when none
 */
public record PolicySpec(PolicyFactory factory, String options) {

    public PolicySpec {
        Objects.requireNonNull(factory, "factory");
        Objects.requireNonNull(options, "options");
    }

    /**
     * Parses {@code NAME[:OPTIONS]}.
     *
     * @throws IllegalArgumentException naming the problem (an unknown name lists the registered ones)
     */
    public static PolicySpec parse(String text) {
        String t = text == null ? "" : text.strip();
        int colon = t.indexOf(':');
        String name = colon < 0 ? t : t.substring(0, colon);
        String options = colon < 0 ? "" : t.substring(colon + 1);
        PolicyFactory factory = PolicyRegistry.get(name);
        if (!factory.takesOptions() && !options.isEmpty()) {
            throw new IllegalArgumentException("policy " + name + " takes no options, got '" + options + "'");
        }
        if (factory.takesOptions()) {
            factory.checkOptions(options);
        }
        return new PolicySpec(factory, options);
    }

    /** Parses each of {@code texts} in order (a command's repeated {@code --policy} options). */
    public static List<PolicySpec> parseAll(List<String> texts) {
        List<PolicySpec> specs = new ArrayList<>(texts.size());
        for (String t : texts) {
            specs.add(parse(t));
        }
        return specs;
    }

    /** The policy's registered name. */
    public String name() {
        return factory.name();
    }

    /** Whether this is the PyTorch-exact allocator ({@link PolicyRegistry#EXACT}) under some configuration. */
    public boolean exact() {
        return PolicyRegistry.isExact(name());
    }

    /** The label a table shows: the name, with the options after a colon when there are any. */
    public String label() {
        return options.isEmpty() ? name() : name() + ":" + options;
    }

    /** Prepares the policy to serve a stream with these facts ({@link PolicyFactory#prepare}). */
    public PreparedPolicy prepare(StreamFacts facts) {
        return factory.prepare(options, facts);
    }

    /**
     * An allocator on {@code device} knowing nothing of what it will serve ({@link StreamFacts#none()}); a policy
     * that needs a profile refuses (IllegalStateException).
     */
    public GpuAllocator create(Device device) {
        return prepare(StreamFacts.none()).create(device);
    }
}
