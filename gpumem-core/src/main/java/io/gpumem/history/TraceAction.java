package io.gpumem.history;

import io.gpumem.config.EnumByKey;

/**
 * The actions of a memory-history trace entry (allocator.md §10.5), with the names PyTorch writes into snapshots.
 * Shared by our allocator's history and snapshot files (see {@link TraceEntry}).
 *
 * <p>Our allocator records every action except {@link #ANNOTATE} (user annotations PyTorch writes into the
 * trace) and {@link #UNKNOWN}. {@code UNKNOWN} stands for an action name a file carries that this version does
 * not know: readers map such names to it and keep the name as recorded on the entry (gpumem-trace's
 * {@code TraceEntry.actionName}), so that writers reproduce it and analyses can skip it.
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
    OOM("oom"),
    ANNOTATE("annotate"),
    /** Read from a file with an action name this version does not know (wire name ""). */
    UNKNOWN("");

    private static final EnumByKey<String, TraceAction> BY_WIRE_NAME =
            EnumByKey.of(values(), TraceAction::wireName, UNKNOWN);

    private final String wireName;

    TraceAction(String wireName) {
        this.wireName = wireName;
    }

    /** The name used in snapshots, e.g. {@code "free_requested"} ("" for {@link #UNKNOWN}). */
    public String wireName() {
        return wireName;
    }

    /** The action for a snapshot name; {@link #UNKNOWN} for names this version does not know. */
    public static TraceAction ofWireName(String name) {
        return BY_WIRE_NAME.get(name);
    }

    /** Whether the entry records a driver call (segment created, freed, mapped or unmapped). */
    public boolean isSegmentEvent() {
        return this == SEGMENT_ALLOC || this == SEGMENT_FREE || this == SEGMENT_MAP || this == SEGMENT_UNMAP;
    }
}
