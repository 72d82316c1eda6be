package io.gpumem.trace.analysis;

import java.util.List;

/**
 * The verdict of {@link DiagnosisRules}: what is to blame, why the rules fired, and the figures they used.
 *
 * @param kind      the verdict
 * @param trigger   what asked for a diagnosis (an {@code oom} entry, a state near capacity), or why none was made
 * @param evidence  the figures behind the verdict, one sentence each
 * @param shortfall bytes the failed request lacked even counting cached and driver-free bytes (0 when none or unknown)
 * @param outside   bytes held outside the allocator (capacity − reserved − device free), or −1 when unknown
 */
public record Diagnosis(DiagnosisKind kind, String trigger, List<String> evidence, long shortfall, long outside) {
    public Diagnosis {
        evidence = List.copyOf(evidence);
    }
}
