package io.gpumem.cli.options;

import io.gpumem.policy.PolicySpec;
import java.util.ArrayList;
import java.util.List;
import picocli.CommandLine.Option;

/**
 * The {@code --policy NAME[:OPTIONS]} option of the commands that replay a request stream under allocation
 * policies beside configurations ({@code compare}, {@code predict}, {@code report}, {@code analyze}, {@code demo}):
 * one name, one description, one parser ({@link AllocatorOptions#policies}) for all of them.
 */
public final class PolicyOptions {

    @Option(
            names = "--policy",
            paramLabel = "NAME[:OPTIONS]",
            description = "An allocation policy to replay beside the configurations (repeatable; default: none):"
                    + " pytorch[:CONF] (the PyTorch-exact allocator), stitch (virtual-memory stitching), planned"
                    + " (plan from the requests, serve online), rmm-pool[:initial=SIZE,max=SIZE] (RAPIDS RMM's pool)"
                    + " or any registered policy; a row of the table where the"
                    + " command prints one, a candidate of the recommender where it recommends.")
    List<String> policies = new ArrayList<>();

    /**
     * The policies given, parsed, in order.
     *
     * @throws BadInputException reading {@code bad --policy: REASON} for one that does not parse
     */
    public List<PolicySpec> specs() {
        return AllocatorOptions.policies(policies);
    }
}
