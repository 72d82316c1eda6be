package io.gpumem.events;

import jdk.jfr.Category;
import jdk.jfr.DataAmount;
import jdk.jfr.Description;
import jdk.jfr.Event;
import jdk.jfr.Label;
import jdk.jfr.MemoryAddress;
import jdk.jfr.Name;

/** JFR event: A segment returned to the device (cudaFree), or pages unmapped from an expandable segment. Emitted through {@link AllocatorEvents}. */
@Name("gpumem.SegmentFree")
@Label("Segment Freed")
@Category({"gpumem", "Allocator"})
@Description("A segment returned to the device (cudaFree), or pages unmapped from an expandable segment.")
public final class SegmentFreeEvent extends Event {
    @Label("Device")
    int device;

    @Label("Address")
    @MemoryAddress
    long address;

    @Label("Size")
    @DataAmount
    long size;

    @Label("Stream")
    long stream;

    @Label("Unmapped")
    @Description("pages unmapped from an expandable segment rather than a cudaFree")
    boolean unmapped;
}
