package io.gpumem.events;

import jdk.jfr.Category;
import jdk.jfr.Description;
import jdk.jfr.Label;
import jdk.jfr.Name;

/** JFR event: A segment returned to the device (cudaFree), or pages unmapped from an expandable segment. Emitted through {@link AllocatorEvents}. */
@Name("gpumem.SegmentFree")
@Label("Segment Freed")
@Category({"gpumem", "Allocator"})
@Description("A segment returned to the device (cudaFree), or pages unmapped from an expandable segment.")
public final class SegmentFreeEvent extends SegmentEvent {
    @Label("Unmapped")
    @Description("pages unmapped from an expandable segment rather than a cudaFree")
    boolean unmapped;
}
