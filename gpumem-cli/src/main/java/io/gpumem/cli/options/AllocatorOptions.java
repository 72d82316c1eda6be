package io.gpumem.cli.options;

import io.gpumem.config.AllocatorConfig;
import io.gpumem.config.ConfigException;
import io.gpumem.policy.PolicySpec;
import java.util.ArrayList;
import java.util.List;

/**
 * The values of the allocator options the trace commands share ({@code --config CONF}, {@code --policy
 * NAME[:OPTIONS]}), parsed the same way everywhere: a value that does not parse is a {@link BadInputException}
 * reading {@code bad --config: REASON} or {@code bad --policy: REASON}.
 */
public final class AllocatorOptions {

    private AllocatorOptions() {}

    /** One {@code --config} value. */
    public static AllocatorConfig config(String conf) {
        try {
            return AllocatorConfig.parse(conf);
        } catch (ConfigException e) {
            throw new BadInputException("bad --config: " + e.getMessage(), e);
        }
    }

    /** Every {@code --config} value, in order. */
    public static List<AllocatorConfig> configs(List<String> confs) {
        List<AllocatorConfig> parsed = new ArrayList<>();
        for (String c : confs) {
            parsed.add(config(c));
        }
        return parsed;
    }

    /** One {@code --policy} value. */
    public static PolicySpec policy(String policy) {
        return policies(List.of(policy)).getFirst();
    }

    /** Every {@code --policy} value, in order. */
    public static List<PolicySpec> policies(List<String> policies) {
        try {
            return PolicySpec.parseAll(policies);
        } catch (IllegalArgumentException e) {
            throw new BadInputException("bad --policy: " + e.getMessage(), e);
        }
    }
}
