package io.gpumem.events;

import jdk.jfr.Category;
import jdk.jfr.DataAmount;
import jdk.jfr.Description;
import jdk.jfr.Event;
import jdk.jfr.Label;
import jdk.jfr.Name;

/** JFR event: a request failed with out-of-memory (num_ooms), with the figures of its OOM report. */
@Name("gpumem.OutOfMemory")
@Label("Out Of Memory")
@Category({"gpumem", "Allocator"})
@Description("A request failed with out-of-memory after the allocator freed its cache and retried.")
public final class OutOfMemoryEvent extends Event {
    @Label("Device")
    int device;

    @Label("Requested")
    @DataAmount
    long requested;

    @Label("Size")
    @Description("The request rounded as the allocator rounds it")
    @DataAmount
    long size;

    @Label("Stream")
    long stream;

    @Label("Device Free")
    @DataAmount
    long deviceFree;

    @Label("Allocated")
    @DataAmount
    long allocated;

    @Label("Reserved")
    @DataAmount
    long reserved;
}
