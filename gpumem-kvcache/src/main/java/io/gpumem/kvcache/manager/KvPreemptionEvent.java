package io.gpumem.kvcache.manager;

import java.util.Locale;
import jdk.jfr.Category;
import jdk.jfr.Description;
import jdk.jfr.Event;
import jdk.jfr.EventType;
import jdk.jfr.FlightRecorder;
import jdk.jfr.Label;
import jdk.jfr.Name;

/**
 * JFR event: the KV cache manager preempted a running request ({@link KvCacheManager#preempt}). Costs one
 * read of the event type's enabled flag when no recording asks for it: the event is built only when enabled. The
 * event type is looked up only once Flight Recorder is initialized (as in core's {@code AllocatorEvents}): the
 * lookup starts JFR's event machinery, a large part of a short command's start-up.
 */
@Name("gpumem.KvPreemption")
@Label("KV Preemption")
@Category({"gpumem", "KV Cache"})
@Description(
        "A running request was preempted: its KV blocks freed (recompute) or copied to the host swap space (swap).")
public final class KvPreemptionEvent extends Event {
    /** The event type, initialized on first use, which {@link FlightRecorder#isInitialized()} defers. */
    private static final class Type {
        static final EventType TYPE = EventType.getEventType(KvPreemptionEvent.class);
    }

    @Label("Request")
    String request;

    @Label("Mode")
    @Description("recompute or swap, as applied")
    String mode;

    @Label("Swap Fallback")
    @Description("a swap was asked for but the host swap space was full, so the request is recomputed")
    boolean swapFallback;

    @Label("Blocks")
    int blocks;

    @Label("Computed Tokens")
    @Description("tokens whose KV the request had computed before the preemption")
    int computedTokens;

    static void emit(String request, PreemptionMode mode, boolean swapFallback, int blocks, int computedTokens) {
        if (FlightRecorder.isInitialized() && Type.TYPE.isEnabled()) {
            KvPreemptionEvent e = new KvPreemptionEvent();
            if (e.shouldCommit()) {
                e.request = request;
                e.mode = mode.name().toLowerCase(Locale.ROOT);
                e.swapFallback = swapFallback;
                e.blocks = blocks;
                e.computedTokens = computedTokens;
                e.commit();
            }
        }
    }
}
