package io.gpumem.events;

import jdk.jfr.DataAmount;
import jdk.jfr.Event;
import jdk.jfr.Label;
import jdk.jfr.MemoryAddress;

/**
 * The fields a segment's allocation and its release both record: which device, where, how large and on which
 * stream. JFR records a superclass's fields with each concrete event (an abstract event class is never
 * registered itself), so {@link SegmentAllocEvent} and {@link SegmentFreeEvent} add only their own flag.
 */
abstract class SegmentEvent extends Event {
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

    /** Sets the shared fields (called only once {@code shouldCommit()} said yes). */
    final void segment(int device, long address, long size, long stream) {
        this.device = device;
        this.address = address;
        this.size = size;
        this.stream = stream;
    }
}
