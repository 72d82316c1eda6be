package io.gpumem.policy;

import io.gpumem.alloc.CachingAllocator;
import io.gpumem.config.AllocatorConfig;
import io.gpumem.config.ConfigException;
import io.gpumem.device.Device;
import java.util.List;

/**
 * A policy as a user names it: {@code NAME[:OPTIONS]}. {@code pytorch[:CONF]} is the PyTorch-exact caching
 * allocator under a {@code PYTORCH_CUDA_ALLOC_CONF} string (default: PyTorch's defaults); {@code stitch} and
 * {@code planned} take no options (a planned policy also needs a profile, which its caller supplies).
 */
public record PolicySpec(String name, String options) {

    /** The policy names gpumem knows. */
    public static final List<String> NAMES = List.of("pytorch", "stitch", "planned");

    /** Parses each of {@code texts} in order (a command's repeated {@code --policy} options). */
    public static List<PolicySpec> parseAll(List<String> texts) {
        List<PolicySpec> specs = new java.util.ArrayList<>(texts.size());
        for (String t : texts) {
            specs.add(parse(t));
        }
        return specs;
    }

    /** Parses {@code NAME[:OPTIONS]}; @throws IllegalArgumentException with a message naming the problem */
    public static PolicySpec parse(String text) {
        String t = text == null ? "" : text.strip();
        int colon = t.indexOf(':');
        String name = colon < 0 ? t : t.substring(0, colon);
        String options = colon < 0 ? "" : t.substring(colon + 1);
        if (!NAMES.contains(name)) {
            throw new IllegalArgumentException("unknown policy '" + name + "' (known: " + String.join(", ", NAMES) + ")");
        }
        if (!name.equals("pytorch") && !options.isEmpty()) {
            throw new IllegalArgumentException("policy " + name + " takes no options, got '" + options + "'");
        }
        if (name.equals("pytorch")) {
            try {
                AllocatorConfig.parse(options);
            } catch (ConfigException e) {
                throw new IllegalArgumentException("policy pytorch: " + e.getMessage(), e);
            }
        }
        return new PolicySpec(name, options);
    }

    /** The label a table shows: the name, with the options after a colon when there are any. */
    public String label() {
        return options.isEmpty() ? name : name + ":" + options;
    }

    /** Creates an online policy on {@code device} ({@code planned} needs a profile: see {@link PlannedAllocator}). */
    public AllocatorPolicy create(Device device) {
        return switch (name) {
            case "pytorch" -> new CachingPolicy(new CachingAllocator(device, AllocatorConfig.parse(options)));
            case "stitch" -> new StitchAllocator(device);
            default -> throw new IllegalArgumentException("policy " + name + " needs a profile to plan from");
        };
    }
}
