package io.gpumem.trace.category;

/**
 * One block of a replayed window with its category and the rule that gave it.
 *
 * @param request    the request (the {@code request}-th alloc entry) that allocated it, −1 for a block live at the
 *                   window's start
 * @param address    its address
 * @param bytes      what it adds to allocated bytes while live: the request's {@code round_size}, or a start
 *                   block's size
 * @param allocEntry trace index of its alloc entry, −1 when live at the window's start
 * @param freeEntry  trace index of the entry at which the program freed it (its {@code free_requested}, or its
 *                   {@code free_completed} in a trace without requests), −1 when not freed in the window: when the
 *                   program let go of it, which the category rules read
 * @param releaseEntry trace index of the entry at which its bytes stop counting: its {@code free_completed} (a block
 *                   freed while another stream still used it is held until that use's event completes, as the
 *                   report's timeline and a replay count it), {@code freeEntry} in a trace that records no
 *                   completions, −1 when still held at the window's end
 * @param step       the step (of the window's step structure) it was allocated in, −1 for a start block
 */
public record CategorizedBlock(
        int request,
        long address,
        long bytes,
        int allocEntry,
        int freeEntry,
        int releaseEntry,
        int step,
        CategoryRule rule) {

    public ByteCategory category() {
        return rule.category();
    }

    /** Whether the block holds its bytes just after trace entry {@code entry} (−1: at the window's start). */
    public boolean liveAt(int entry) {
        return allocEntry <= entry && (releaseEntry < 0 || releaseEntry > entry);
    }

    /** This block with another rule (and so category). */
    CategorizedBlock withRule(CategoryRule other) {
        return new CategorizedBlock(request, address, bytes, allocEntry, freeEntry, releaseEntry, step, other);
    }
}
