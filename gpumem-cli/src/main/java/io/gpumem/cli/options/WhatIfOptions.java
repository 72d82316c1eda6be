package io.gpumem.cli.options;

import io.gpumem.config.AllocatorConfig;
import io.gpumem.policy.PolicySpec;
import java.util.ArrayList;
import java.util.List;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Option;

/**
 * The rows the user adds to a what-if table beside the recorded configuration ({@code compare}, {@code predict},
 * {@code report}): {@code -c/--config CONF} for allocator configurations and {@code --policy} ({@link PolicyOptions})
 * for allocation policies, each with one name, one description and one parser ({@link AllocatorOptions}).
 */
public final class WhatIfOptions {

    @Option(
            names = {"-c", "--config"},
            paramLabel = "CONF",
            description = "A configuration to replay and add as a row, PYTORCH_CUDA_ALLOC_CONF syntax, e.g."
                    + " expandable_segments:True or max_split_size_mb:128 (repeatable; default: none).")
    List<String> configs = new ArrayList<>();

    @Mixin
    PolicyOptions policies;

    /** The configurations as given, in order. */
    public List<String> configValues() {
        return List.copyOf(configs);
    }

    /**
     * The configurations given, parsed, in order.
     *
     * @throws BadInputException reading {@code bad --config: REASON} for one that does not parse
     */
    public List<AllocatorConfig> configs() {
        return AllocatorOptions.configs(configs);
    }

    /**
     * The policies given, parsed, in order.
     *
     * @throws BadInputException reading {@code bad --policy: REASON} for one that does not parse
     */
    public List<PolicySpec> policies() {
        return policies.specs();
    }
}
