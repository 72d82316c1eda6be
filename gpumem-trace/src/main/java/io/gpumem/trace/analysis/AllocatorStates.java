package io.gpumem.trace.analysis;

import io.gpumem.alloc.CachingAllocator;
import io.gpumem.alloc.GpuAllocator;
import io.gpumem.history.MemorySnapshot;
import io.gpumem.history.SegmentInfo;

/**
 * Builds the analysis input from a live {@link CachingAllocator}: its snapshot's segments and blocks, the
 * device's capacity and free memory, and the configuration in force.
 */
public final class AllocatorStates {
    private AllocatorStates() {}

    /**
     * The allocator's state now.
     *
     * @param allocatorConf the configuration it runs under ("" for defaults or a policy without one)
     * @param label         what to call it in the report
     * @param oom           the out-of-memory that ended the run, or {@code null}
     */
    public static MemoryState capture(GpuAllocator allocator, String allocatorConf, String label, OomEvent oom) {
        MemorySnapshot snapshot = allocator.snapshot();
        return fromSnapshot(snapshot, allocator.device().index(), label)
                .capacity(allocator.device().totalMemory())
                .deviceFree(allocator.device().freeMemory())
                .allocatorConf(allocatorConf)
                .oom(oom)
                .build();
    }

    /** A builder holding the segments of one device of an allocator snapshot. */
    public static MemoryState.Builder fromSnapshot(MemorySnapshot snapshot, int device, String label) {
        MemoryState.Builder b = MemoryState.builder().label(label).device(device);
        for (SegmentInfo s : snapshot.segments()) {
            if (s.device() == device) {
                b.segment(s);
            }
        }
        return b;
    }
}
