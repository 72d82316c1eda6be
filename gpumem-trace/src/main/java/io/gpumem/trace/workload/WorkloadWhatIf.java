package io.gpumem.trace.workload;

import io.gpumem.config.AllocatorConfig;
import io.gpumem.engine.MinimumCapacity;
import io.gpumem.engine.RequestStream;
import io.gpumem.engine.RunOptions;
import io.gpumem.engine.RunOutcome;
import io.gpumem.engine.StreamRunner;
import io.gpumem.policy.PolicyFactory;
import io.gpumem.policy.PolicyRegistry;
import io.gpumem.policy.PolicySpec;
import io.gpumem.policy.PreparedPolicy;
import io.gpumem.size.ByteSize;
import io.gpumem.trace.align.PredictedRecording;
import io.gpumem.trace.analysis.MemoisedWhatIf;
import io.gpumem.trace.analysis.WhatIf;
import io.gpumem.trace.replay.ProgressListener;
import java.util.List;
import java.util.Optional;

/**
 * The compare runs behind a workload's table and its recommendations: the workload compiled once into the engine's
 * request stream and run from scratch by its {@link StreamRunner} under each configuration or policy on the same
 * simulated device, the way a training job runs (it stops at the first out-of-memory error), with the minimum
 * capacity searched when asked. Outcomes are memoised per configuration ({@link MemoisedWhatIf}), so the table and the recommender
 * share runs, and a prefetch runs them one per core. A generated training workload can also run with half its batch.
 */
public final class WorkloadWhatIf extends MemoisedWhatIf {
    /** The alternatives the demo compares with the defaults. */
    public static final List<String> DEMO_ALTERNATIVES =
            List.of("expandable_segments:True", "max_split_size_mb:256", "roundup_power2_divisions:4");
    /** The policies the demo adds to its table: every registered one beside the exact allocator. */
    public static List<String> demoPolicies() {
        return PolicyRegistry.alternatives().stream().map(PolicyFactory::name).toList();
    }
    /** Capacity of the run that measures an unconstrained peak (1 TiB). */
    public static final long UNLIMITED = 1L << 40;
    /**
     * The largest capacity the runs take: the largest device gpumem plays a program on
     * ({@link PredictedRecording#MAX_DEVICE_BYTES}, 32 TiB, hundreds of times any GPU's memory). Above it the runs
     * stop being models of anything: the minimum-capacity search starts from 4 times the capacity, where
     * expandable segments and stitch arenas (sized from the device) outgrow the pages they index.
     */
    public static final long MAX_CAPACITY = PredictedRecording.MAX_DEVICE_BYTES;

    private final AllocationWorkload workload;
    private final StreamRunner runner;
    private final long capacity;
    private final long heldOutside;
    private final boolean withMinCapacity;

    /**
     * @param capacity    device capacity in bytes (the minimum-capacity search ignores it), at most
     *                    {@link #MAX_CAPACITY}
     * @param heldOutside bytes held by others on the device (context, other processes)
     * @throws IllegalArgumentException when capacity is over {@link #MAX_CAPACITY}
     */
    public WorkloadWhatIf(AllocationWorkload workload, long capacity, long heldOutside, boolean withMinCapacity) {
        super(ProgressListener.NONE);
        checkCapacity("capacity", capacity);
        this.workload = workload;
        this.capacity = capacity;
        this.heldOutside = heldOutside;
        this.withMinCapacity = withMinCapacity;
        options(capacity).build(); // validates capacity and held-outside bytes
        this.runner = new StreamRunner(workload.stream());
    }

    @Override
    public String description() {
        return workload.describe();
    }

    /**
     * Refuses a capacity over {@link #MAX_CAPACITY}, naming it as {@code option} (a caller checks before any
     * output with its own option's name).
     */
    public static void checkCapacity(String option, long capacity) {
        if (capacity > MAX_CAPACITY) {
            throw new IllegalArgumentException(option + " " + ByteSize.formatSigned(capacity)
                    + " is over the largest device the runs model, " + ByteSize.formatSigned(MAX_CAPACITY));
        }
    }

    /** The compiled request stream. */
    public RequestStream stream() {
        return runner.stream();
    }

    public long capacity() {
        return capacity;
    }

    @Override
    protected RunOutcome evaluate(String conf) {
        return outcome(runner, PolicyRegistry.exact(AllocatorConfig.parse(conf)))
                .label(conf)
                .build();
    }

    /** The row of policy {@code spec}, labelled {@code policy NAME[:OPTIONS]}. */
    @Override
    protected RunOutcome evaluate(PolicySpec spec) {
        return outcome(runner, runner.prepare(spec))
                .label(WhatIf.policyLabel(spec))
                .policy(spec.name())
                .build();
    }

    /**
     * One run under {@code conf} at the capacity with history recorded (each request named by its stack), the
     * allocator and device kept in their final state (at the OOM when one stopped the run).
     */
    public RunOutcome runWithHistory(String conf) {
        return runner
                .run(
                        PolicyRegistry.exact(AllocatorConfig.parse(conf)),
                        options(capacity)
                                .recordHistory(true)
                                .keepAllocator(true)
                                .build())
                .toBuilder()
                .label(conf)
                .build();
    }

    @Override
    public Optional<RunOutcome> runSmallerBatch() {
        if (!(workload instanceof TrainingWorkload training)
                || training.settings().batch() < 2) {
            return Optional.empty();
        }
        int half = training.settings().batch() / 2;
        StreamRunner smaller = new StreamRunner(training.withBatch(half).stream());
        return Optional.of(outcome(smaller, PolicyRegistry.exact(AllocatorConfig.parse("")))
                .label("batch " + half)
                .build());
    }

    private RunOutcome.Builder outcome(StreamRunner r, PreparedPolicy policy) {
        RunOutcome.Builder row = r.run(policy, options(capacity).build()).toBuilder();
        if (withMinCapacity && !beyondLargestDevice(r.stream())) {
            row.minCapacity(r.minimumCapacity(policy, options(capacity).build(), Math.max(4 * capacity, UNLIMITED)));
        }
        return row;
    }

    /**
     * Why the rows have no minimum capacity although one was asked for, or empty: a workload with more bytes live at
     * once (with those held outside) than {@link #MAX_CAPACITY} has none on any device the runs model, and searching
     * for it would play the workload on devices of hundreds of TiB, whose expandable segments and stitch arenas map
     * more pages than a heap holds (a 593 TiB workload ran the demo out of a 2 GiB heap).
     */
    public Optional<String> minCapacityNotSearched() {
        if (!withMinCapacity || !beyondLargestDevice(stream())) {
            return Optional.empty();
        }
        return Optional.of("minimum capacity not searched: the workload has "
                + ByteSize.formatSigned(stream().peakLiveBytes()) + " live at once"
                + (heldOutside > 0 ? " beside " + ByteSize.formatSigned(heldOutside) + " held outside" : "")
                + ", more than the largest device the runs model (" + ByteSize.formatSigned(MAX_CAPACITY) + ")");
    }

    /**
     * Whether the stream needs more than {@link #MAX_CAPACITY} but not more than any device could hold: past
     * {@link MinimumCapacity#LARGEST} the search is left to refuse it, naming the largest request, as it does at once
     * without a probe.
     */
    private boolean beyondLargestDevice(RequestStream s) {
        long live = s.peakLiveBytes();
        return live > MAX_CAPACITY - heldOutside && live <= MinimumCapacity.LARGEST - heldOutside;
    }

    private RunOptions.Builder options(long bytes) {
        return RunOptions.builder(bytes).heldOutside(heldOutside).stopAtFirstOom(true);
    }
}
