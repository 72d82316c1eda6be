package io.gpumem.alloc;

import io.gpumem.config.AllocatorConfig;
import io.gpumem.device.SimulatedDevice;
import io.gpumem.history.TraceEntry;
import java.util.ArrayList;
import java.util.List;

/** Fixtures shared by the spec-audit test classes: sizes, devices, configs and a trace recorder. */
final class SpecAuditSupport {

    private SpecAuditSupport() {}

    static SimulatedDevice device(long capacity) {
        return SimulatedDevice.builder().capacity(capacity).build();
    }

    static AllocatorConfig.Builder cfg() {
        return AllocatorConfig.defaults().toBuilder();
    }

    /** Records every trace entry from now on, history on or off. */
    static List<TraceEntry> tracked(CachingAllocator a) {
        List<TraceEntry> seen = new ArrayList<>();
        a.internals().attachTraceTracker(seen::add);
        return seen;
    }

    static List<String> actions(List<TraceEntry> t) {
        return t.stream().map(e -> e.action().wireName()).toList();
    }
}
