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
 * @param freeEntry  trace index of the entry that frees it, −1 when live at the window's end
 * @param step       the step (of the window's step structure) it was allocated in, −1 for a start block
 */
public record CategorizedBlock(
        int request, long address, long bytes, int allocEntry, int freeEntry, int step, CategoryRule rule) {

    public ByteCategory category() {
        return rule.category();
    }

    /** Whether the block is live just after trace entry {@code entry} (−1: at the window's start). */
    public boolean liveAt(int entry) {
        return allocEntry <= entry && (freeEntry < 0 || freeEntry > entry);
    }
}
