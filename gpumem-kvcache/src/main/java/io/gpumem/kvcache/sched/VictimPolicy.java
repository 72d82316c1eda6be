package io.gpumem.kvcache.sched;

/** Which running request gives its blocks back when another cannot grow. */
public enum VictimPolicy {
    /** The most recently admitted request (vLLM's FCFS policy: last of the running list). */
    FCFS,
    /** The least important: largest priority value, then latest arrival (vLLM's priority policy). */
    PRIORITY,
    /** The request with the fewest computed tokens: the cheapest to recompute (vLLM RFC #54644). */
    LEAST_COMPUTED;

    public static VictimPolicy parse(String s) {
        String n = s.replace('-', '_');
        for (VictimPolicy p : values()) {
            if (p.name().equalsIgnoreCase(n)) {
                return p;
            }
        }
        throw new IllegalArgumentException(
                "unknown victim policy '" + s + "' (expected fcfs, priority or least-computed)");
    }
}
