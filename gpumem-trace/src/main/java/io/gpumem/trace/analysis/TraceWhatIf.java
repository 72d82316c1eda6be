package io.gpumem.trace.analysis;

import io.gpumem.config.AllocatorConfig;
import io.gpumem.trace.io.TraceSnapshot;
import io.gpumem.trace.replay.WhatIfReplay;
import io.gpumem.engine.RunOutcome;
import io.gpumem.trace.window.RecordedConfig;
import io.gpumem.trace.window.WindowRebuilder;
import java.util.HashMap;
import java.util.Map;

/**
 * The compare runs behind {@code analyze}'s recommendations for a recorded trace: {@link WhatIfReplay} (the
 * {@code gpumem compare} engine) replays the device's window from its rebuilt start state under each
 * configuration, at the recorded capacity (or the one the user gave), and searches its minimum capacity.
 * Outcomes are memoised per configuration string.
 */
public final class TraceWhatIf implements WhatIf {
    private final WhatIfReplay replay;
    private final AllocatorConfig recordedConfig;
    private final String recordedConf;
    private final long capacity;
    private final int device;
    private final int entries;
    private final Map<String, RunOutcome> cache = new HashMap<>();

    /**
     * @param capacity the device memory the allocator may use (capacity less memory held outside it), or
     *                 {@link MemoryState#UNKNOWN} for the capacity the recording shows
     */
    public TraceWhatIf(TraceSnapshot snapshot, int device, long capacity) {
        this.recordedConfig = RecordedConfig.of(snapshot);
        this.recordedConf = snapshot.recordedConfString() == null ? "" : snapshot.recordedConfString();
        this.replay = new WhatIfReplay(snapshot, device, new WindowRebuilder(recordedConfig).rebuild(snapshot, device));
        this.capacity = capacity > 0 ? capacity : replay.recordedCapacity(recordedConfig);
        this.device = device;
        this.entries = snapshot.traceOf(device).size();
    }

    @Override
    public String description() {
        return "device " + device + "'s trace window (" + entries + " entries) from its rebuilt start state";
    }

    @Override
    public RunOutcome run(String allocatorConf) {
        return cache.computeIfAbsent(allocatorConf, conf -> {
            boolean recorded = conf.equals(recordedConf);
            AllocatorConfig config = recorded ? recordedConfig : AllocatorConfig.parse(conf);
            // the row is labelled by the configuration string asked for; device maps and timing are not shown
            return replay.evaluate(config, recorded, capacity).toBuilder().label(conf).deviceMaps(0).nsPerPair(0)
                    .build();
        });
    }
}
