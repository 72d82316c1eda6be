package io.gpumem.events;

import jdk.jfr.Category;
import jdk.jfr.Description;
import jdk.jfr.Label;
import jdk.jfr.Name;

/** JFR event: A cudaMalloc'd segment, or pages mapped into an expandable segment. Emitted through {@link AllocatorEvents}. */
@Name("gpumem.SegmentAlloc")
@Label("Segment Allocated")
@Category({"gpumem", "Allocator"})
@Description("A cudaMalloc'd segment, or pages mapped into an expandable segment.")
public final class SegmentAllocEvent extends SegmentEvent {
    @Label("Mapped")
    @Description("pages mapped into an expandable segment rather than a cudaMalloc")
    boolean mapped;
}
