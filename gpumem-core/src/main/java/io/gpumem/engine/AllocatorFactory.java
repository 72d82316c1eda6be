package io.gpumem.engine;

import io.gpumem.alloc.GpuAllocator;
import io.gpumem.device.Device;

/**
 * Creates the allocator a {@link StreamRunner} run plays its stream on: a policy (or a configuration of the exact
 * allocator) made concrete on one device. The stream is given so that a policy that plans from a profile of the
 * requests can read it; most ignore it. Each call returns a fresh allocator.
 */
@FunctionalInterface
public interface AllocatorFactory {

    /** A fresh allocator on {@code device}; may throw {@link io.gpumem.oom.OutOfMemoryException} when it cannot start. */
    GpuAllocator create(Device device, RequestStream stream);
}
