package io.gpumem.policy;

import io.gpumem.alloc.GpuAllocator;
import io.gpumem.device.Device;

/**
 * A policy ready to serve one request stream ({@link PolicyFactory#prepare}): whatever it learnt from the stream
 * (a plan, say) is made once, and each call of {@link #create} makes a fresh allocator on its own device, so a
 * capacity search can run the same stream many times without preparing again. Safe to call from several threads
 * when each call has its own device.
 */
@FunctionalInterface
public interface PreparedPolicy {

    /** A new allocator drawing memory from {@code device}. */
    GpuAllocator create(Device device);
}
