package io.gpumem.history;

/**
 * Sees each trace entry an allocator records as its four plain fields, without the {@link TraceEntry} being
 * built: for replays that compare every driver call the allocator makes with a recording and must not allocate
 * per operation to do it. Called under the allocator's lock, in recording order; must not call the allocator.
 */
@FunctionalInterface
public interface TraceListener {

    /** One entry: what happened, at which address, how many bytes, on which stream. */
    void onEntry(TraceAction action, long addr, long size, long stream);
}
