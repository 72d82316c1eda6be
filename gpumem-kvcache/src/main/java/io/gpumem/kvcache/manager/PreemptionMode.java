package io.gpumem.kvcache.manager;

/** How a preempted request gives its blocks back. */
public enum PreemptionMode {
    /** Free the blocks (their cache entries survive) and recompute on resume, re-hitting what is still cached. */
    RECOMPUTE,
    /** Copy the blocks to the host swap space and copy them back on resume. */
    SWAP;

    public static PreemptionMode parse(String s) {
        for (PreemptionMode m : values()) {
            if (m.name().equalsIgnoreCase(s)) {
                return m;
            }
        }
        throw new IllegalArgumentException("unknown preemption mode '" + s + "' (expected recompute or swap)");
    }
}
