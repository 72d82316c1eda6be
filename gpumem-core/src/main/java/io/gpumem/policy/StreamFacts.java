package io.gpumem.policy;

import io.gpumem.plan.LifetimeProblem;
import java.util.Objects;
import java.util.function.Supplier;
import org.jspecify.annotations.Nullable;

/**
 * What a policy may learn about a request stream before it serves it ({@link PolicyFactory#prepare}): whether the
 * stream marks the steps of an iterated workload (so the allocator will see
 * {@link io.gpumem.alloc.GpuAllocatorInternals#stepBoundary()} calls), and the stream's profile: each allocation as
 * a buffer whose lifetime runs, on the stream's own clock, from its request to its free (or the end). The profile
 * is built on first use only, since most policies never ask for it; a stream that cannot offer one says so.
 */
public final class StreamFacts {
    private static final StreamFacts NONE = new StreamFacts(false, null);

    private final boolean marksSteps;
    private final @Nullable Supplier<LifetimeProblem> source;
    private @Nullable LifetimeProblem profile;

    private StreamFacts(boolean marksSteps, @Nullable Supplier<LifetimeProblem> source) {
        this.marksSteps = marksSteps;
        this.source = source;
    }

    /** Nothing known: no steps marked, no profile (an allocator used directly, outside any stream). */
    public static StreamFacts none() {
        return NONE;
    }

    /**
     * Facts of a stream.
     *
     * @param marksSteps whether the stream marks step boundaries
     * @param profile    builds the stream's profile (called at most once), or {@code null} when there is none
     */
    public static StreamFacts of(boolean marksSteps, @Nullable Supplier<LifetimeProblem> profile) {
        return new StreamFacts(marksSteps, profile);
    }

    /** Whether the stream marks step boundaries (an iterated workload such as a training loop). */
    public boolean marksSteps() {
        return marksSteps;
    }

    /** Whether {@link #profile()} has something to give. */
    public boolean hasProfile() {
        return source != null;
    }

    /**
     * The stream's profile, built on the first call.
     *
     * @throws IllegalStateException when the stream offers none
     */
    public synchronized LifetimeProblem profile() {
        LifetimeProblem built = profile;
        if (built == null) {
            if (source == null) {
                throw new IllegalStateException("this request stream offers no profile to plan from");
            }
            built = Objects.requireNonNull(source.get(), "profile");
            profile = built;
        }
        return built;
    }
}
