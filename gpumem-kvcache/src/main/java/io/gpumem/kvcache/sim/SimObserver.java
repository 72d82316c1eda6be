package io.gpumem.kvcache.sim;

import io.gpumem.kvcache.manager.KvCacheManager;

/**
 * Watches a {@link ServingSimulator} run from its own thread: told each instance's manager before the first
 * step and when every step ends, so that live figures (metrics, progress) can be published while the
 * simulation works. Callbacks run on the simulating thread, between steps, where reading the (not
 * thread-safe) managers is safe; they must not change them.
 */
public interface SimObserver {
    /** Watches nothing. */
    SimObserver NONE = new SimObserver() {};

    /** Instance {@code instance}'s manager exists; no step has run yet. */
    default void started(int instance, KvCacheManager manager) {}

    /** Step {@code step} (0-based) finished on every instance. */
    default void stepped(long step) {}

    /** The run ended after {@code steps} steps (the managers are still open). */
    default void finished(long steps) {}
}
