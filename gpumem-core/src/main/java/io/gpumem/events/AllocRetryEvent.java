package io.gpumem.events;

import jdk.jfr.Category;
import jdk.jfr.DataAmount;
import jdk.jfr.Description;
import jdk.jfr.Event;
import jdk.jfr.Label;
import jdk.jfr.Name;

/** JFR event: a request found no cached block, freed the cache and retried the device allocation. */
@Name("gpumem.AllocRetry")
@Label("Allocation Retry")
@Category({"gpumem", "Allocator"})
@Description("A request freed the allocator's cache and retried the device allocation (num_alloc_retries).")
public final class AllocRetryEvent extends Event {
    @Label("Device")
    int device;

    @Label("Size")
    @Description("The request rounded as the allocator rounds it")
    @DataAmount
    long size;

    @Label("Allocation Size")
    @Description("The segment size the allocator asked the device for")
    @DataAmount
    long allocSize;

    @Label("Stream")
    long stream;
}
