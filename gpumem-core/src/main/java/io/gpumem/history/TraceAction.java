package io.gpumem.history;

/**
 * The actions of a memory-history trace entry (spec §10.5), with the names PyTorch writes into snapshots.
 */
public enum TraceAction {
    ALLOC("alloc"),
    FREE_REQUESTED("free_requested"),
    FREE_COMPLETED("free_completed"),
    SEGMENT_ALLOC("segment_alloc"),
    SEGMENT_FREE("segment_free"),
    SEGMENT_MAP("segment_map"),
    SEGMENT_UNMAP("segment_unmap"),
    SNAPSHOT("snapshot"),
    OOM("oom");

    private final String wireName;

    TraceAction(String wireName) {
        this.wireName = wireName;
    }

    /** The name used in snapshots, e.g. {@code "free_requested"}. */
    public String wireName() {
        return wireName;
    }

    /** The action for a snapshot name, or {@code null} for unknown actions (parsers should skip those). */
    public static TraceAction ofWireName(String name) {
        for (TraceAction a : values()) {
            if (a.wireName.equals(name)) {
                return a;
            }
        }
        return null;
    }
}
