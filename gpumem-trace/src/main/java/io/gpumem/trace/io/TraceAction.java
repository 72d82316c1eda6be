package io.gpumem.trace.io;

import java.util.HashMap;
import java.util.Map;

/**
 * The kind of a trace entry (spec §10.5). Names are PyTorch's {@code action} strings. Actions this
 * version does not know map to {@link #UNKNOWN}; the entry keeps the original name so nothing is lost.
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
    UNKNOWN("");

    private static final Map<String, TraceAction> BY_NAME = new HashMap<>();

    static {
        for (TraceAction a : values()) {
            if (a != UNKNOWN) {
                BY_NAME.put(a.pythonName, a);
            }
        }
    }

    private final String pythonName;

    TraceAction(String pythonName) {
        this.pythonName = pythonName;
    }

    /** The {@code action} string PyTorch writes ("" for {@link #UNKNOWN}). */
    public String pythonName() {
        return pythonName;
    }

    /** The action for a PyTorch name; {@link #UNKNOWN} for names this version does not know. */
    public static TraceAction fromName(String name) {
        TraceAction a = BY_NAME.get(name);
        return a == null ? UNKNOWN : a;
    }

    /** Whether the entry records a driver call (segment created, freed, mapped or unmapped). */
    public boolean isSegmentEvent() {
        return this == SEGMENT_ALLOC || this == SEGMENT_FREE || this == SEGMENT_MAP || this == SEGMENT_UNMAP;
    }
}
