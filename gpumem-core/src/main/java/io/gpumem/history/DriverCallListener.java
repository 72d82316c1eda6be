package io.gpumem.history;

/**
 * Sees each driver call an allocator records ({@link TraceAction#isSegmentEvent()}: {@code segment_alloc},
 * {@code segment_free}, {@code segment_map}, {@code segment_unmap}) as its four plain fields, without a
 * {@link TraceEntry} being built: for replays that compare every driver call the allocator makes with a recording
 * and must not allocate per operation to do it. Only driver calls, so that the allocator's hot entries (alloc and
 * free) cost nothing while one is attached. Called under the allocator's lock, in recording order; must not call
 * the allocator.
 */
@FunctionalInterface
public interface DriverCallListener {

    /** One driver call: which, at which address, how many bytes, on which stream. */
    void onDriverCall(TraceAction action, long addr, long size, long stream);
}
