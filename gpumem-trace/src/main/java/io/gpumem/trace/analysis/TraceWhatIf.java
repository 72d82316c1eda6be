package io.gpumem.trace.analysis;

import io.gpumem.config.AllocatorConfig;
import io.gpumem.engine.RunOutcome;
import io.gpumem.policy.PolicySpec;
import io.gpumem.trace.replay.ProgressListener;
import io.gpumem.trace.replay.WhatIfReplay;

/**
 * The compare runs behind {@code analyze}'s recommendations for a recorded trace: {@link WhatIfReplay} (the
 * {@code gpumem compare} engine) replays the device's window from its rebuilt start state under each
 * configuration or policy, at the recorded capacity (or the one the user gave), and searches its minimum capacity.
 * Outcomes are memoised per configuration string and per policy ({@link MemoisedWhatIf}), and a prefetch runs them one
 * per core. The replay (window start and compiled request stream) is
 * the caller's, built once per device (a {@code TraceSession}'s window), not rebuilt here.
 */
public final class TraceWhatIf extends MemoisedWhatIf {
    private final WhatIfReplay replay;
    private final AllocatorConfig recordedConfig;
    private final String recordedConf;
    private final long capacity;
    private final int device;
    private final int entries;

    /**
     * @param replay         the device's window, rebuilt under {@code recordedConfig}
     * @param recordedConfig the configuration the trace was recorded under
     * @param capacity       the device memory the allocator may use (capacity less memory held outside it), or
     *                       {@link MemoryState#UNKNOWN} for the capacity the recording shows
     */
    public TraceWhatIf(WhatIfReplay replay, AllocatorConfig recordedConfig, long capacity) {
        this(replay, recordedConfig, capacity, ProgressListener.NONE);
    }

    /** As {@link #TraceWhatIf(WhatIfReplay, AllocatorConfig, long)}, telling {@code progress} how a prefetch goes. */
    public TraceWhatIf(WhatIfReplay replay, AllocatorConfig recordedConfig, long capacity, ProgressListener progress) {
        super(progress);
        String conf = replay.snapshot().recordedConfString();
        this.recordedConfig = recordedConfig;
        this.recordedConf = conf == null ? "" : conf;
        this.replay = replay;
        this.capacity = capacity > 0 ? capacity : replay.recordedCapacity(recordedConfig);
        this.device = replay.device();
        this.entries = replay.snapshot().traceOf(device).size();
    }

    @Override
    public String description() {
        return "device " + device + "'s trace window (" + entries + " entries) from its rebuilt start state";
    }

    @Override
    protected RunOutcome evaluate(String conf) {
        boolean recorded = conf.equals(recordedConf);
        AllocatorConfig config = recorded ? recordedConfig : AllocatorConfig.parse(conf);
        // the row is labelled by the configuration string asked for
        return replay.evaluate(config, recorded, capacity).toBuilder()
                .label(conf)
                .build();
    }

    @Override
    protected RunOutcome evaluate(PolicySpec policy) {
        return replay.evaluate(policy, capacity).toBuilder()
                .label(WhatIf.policyLabel(policy))
                .build();
    }
}
