package io.gpumem.engine;

/**
 * How {@link StreamRunner} runs a stream (what goes in, where {@link RunOutcome} is what comes out): capacity, bytes held outside, when to stop, how to start, what to keep (each component is the
 * {@link Builder} method of its name). Made by {@link #builder}, which states the defaults and names each
 * setting; the canonical constructor only checks the capacity and the bytes held outside.
 */
public record RunOptions(
        long capacity,
        long heldOutside,
        boolean stopAtFirstOom,
        boolean restoreStartLayout,
        boolean recordHistory,
        boolean keepAllocator,
        boolean untilSteady) {

    public RunOptions {
        if (capacity <= 0) {
            throw new IllegalArgumentException("capacity must be positive, got " + capacity);
        }
        if (heldOutside < 0 || heldOutside >= capacity) {
            throw new IllegalArgumentException("held-outside bytes must be in [0, capacity), got " + heldOutside);
        }
    }

    public static Builder builder(long capacity) {
        return new Builder(capacity);
    }

    /**
     * A run that stops at its first failed request, as the job would, and keeps its allocator, with history, in
     * the outcome: the state a program is left in on a device of {@code capacity} bytes.
     */
    public static RunOptions toFirstFailureKeepingState(long capacity) {
        return builder(capacity)
                .stopAtFirstOom(true)
                .recordHistory(true)
                .keepAllocator(true)
                .build();
    }

    /** The same options at another capacity. */
    public RunOptions withCapacity(long c) {
        return toBuilder().capacity(c).build();
    }

    /** A probe of the minimum-capacity search at {@code c}: the whole stream, to its first failure. */
    RunOptions forSearch(long c) {
        return toBuilder()
                .capacity(c)
                .stopAtFirstOom(true)
                .recordHistory(false)
                .keepAllocator(false)
                .untilSteady(false)
                .build();
    }

    Builder toBuilder() {
        return new Builder(capacity)
                .heldOutside(heldOutside)
                .stopAtFirstOom(stopAtFirstOom)
                .restoreStartLayout(restoreStartLayout)
                .recordHistory(recordHistory)
                .keepAllocator(keepAllocator)
                .untilSteady(untilSteady);
    }

    /** Defaults: nothing held outside, failed requests counted, start layout restored, no history, nothing kept. */
    public static final class Builder {
        private long capacity;
        private long heldOutside;
        private boolean stopAtFirstOom;
        private boolean restoreStartLayout = true;
        private boolean recordHistory;
        private boolean keepAllocator;
        private boolean untilSteady;

        private Builder(long capacity) {
            this.capacity = capacity;
        }

        public Builder capacity(long bytes) {
            capacity = bytes;
            return this;
        }

        public Builder heldOutside(long bytes) {
            heldOutside = bytes;
            return this;
        }

        /** Stop at the first failed request (a training job) instead of counting and going on (a trace replay). */
        public Builder stopAtFirstOom(boolean on) {
            stopAtFirstOom = on;
            return this;
        }

        /** Restore the start state in its recorded layout where the allocator can (else: allocate its blocks). */
        public Builder restoreStartLayout(boolean on) {
            restoreStartLayout = on;
            return this;
        }

        /** Record history as {@code _record_memory_history()} does by default, stacks from the stream's sites. */
        public Builder recordHistory(boolean on) {
            recordHistory = on;
            return this;
        }

        /** Keep the allocator and device in their final state in the outcome. */
        public Builder keepAllocator(boolean on) {
            keepAllocator = on;
            return this;
        }

        /**
         * Stop at the first step boundary where reserved memory, now and at its peak, is what it was at the
         * previous one: an iterated stream ({@link RequestStream#iterated}) has reached its steady state, and
         * the outcome's {@link RunOutcome#stepsCompleted()} says after how many steps (fewer than the stream's
         * when it got there).
         */
        public Builder untilSteady(boolean on) {
            untilSteady = on;
            return this;
        }

        public RunOptions build() {
            return new RunOptions(
                    capacity,
                    heldOutside,
                    stopAtFirstOom,
                    restoreStartLayout,
                    recordHistory,
                    keepAllocator,
                    untilSteady);
        }
    }
}
