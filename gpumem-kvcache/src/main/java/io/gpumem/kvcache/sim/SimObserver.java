package io.gpumem.kvcache.sim;

import io.gpumem.kvcache.manager.KvCacheManager;

/**
 * Watches a {@link ServingSimulator} run from its own thread: told when the manager exists and after every
 * step, so that live figures (metrics, progress) can be published while the simulation works. Callbacks run
 * on the simulating thread, between steps, where reading the (not thread-safe) manager is safe; they must not
 * change it.
 */
public interface SimObserver {
    /** Watches nothing. */
    SimObserver NONE = new SimObserver() {
    };

    /** The manager serving the run exists; no step has run yet. */
    default void started(KvCacheManager manager) {
    }

    /** Step {@code step} (0-based) finished. */
    default void stepped(long step, KvCacheManager manager) {
    }

    /** The run ended after {@code steps} steps (the manager is still open). */
    default void finished(long steps, KvCacheManager manager) {
    }
}
