package io.gpumem.trace.window;

/**
 * What each free of a trace window frees, matched by {@link WindowRebuilder}'s forward pass (which follows every
 * address through the window anyway), so that compiling the window into a request stream needs no address table of
 * its own. A <i>freeing entry</i> is a {@code free_completed}, or a {@code free_requested} in a trace without
 * completions; it frees, by address:
 * <ul>
 *   <li>the block of the latest window alloc at its address, when no freeing entry has ended it since: that alloc's
 *       ordinal among the window's alloc entries (address 0 included);</li>
 *   <li>else, when it is the first alloc or freeing entry of its address in the window, the start-state block at
 *       that address ({@link #START_BLOCK}), if the start state holds one;</li>
 *   <li>else nothing ({@link #NOTHING}): that block was freed, or an alloc at the address replaced it.</li>
 * </ul>
 * It also bounds the ops a compiled window can have ({@link #opsAtMost}), so that the compile sizes its arrays once.
 * Immutable.
 */
public final class FreeMatches {

    /** The entry frees nothing the window knows (or is no freeing entry). */
    public static final int NOTHING = -1;
    /** The entry frees the start-state block at its address, if the start state holds one there. */
    public static final int START_BLOCK = -2;

    /** Per entry: 0 nothing, 1 start block, else 2 + the ordinal of the alloc freed. */
    private final int[] code;

    private final boolean hasCompletions;
    private final int opsAtMost;
    private final int allocEntries;

    FreeMatches(int[] code, boolean hasCompletions, int opsAtMost, int allocEntries) {
        this.code = code;
        this.hasCompletions = hasCompletions;
        this.opsAtMost = opsAtMost;
        this.allocEntries = allocEntries;
    }

    /** How many alloc entries the window has (address 0 included): the slots a compile gives them. */
    public int allocEntries() {
        return allocEntries;
    }

    /**
     * The most ops the window compiles into: its alloc entries, its freeing entries and its release entries
     * ({@code segment_free}, {@code segment_unmap}: a run of them is at most one {@code empty_cache} per entry).
     */
    public int opsAtMost() {
        return opsAtMost;
    }

    /** How many trace entries were matched (the window's length). */
    public int entries() {
        return code.length;
    }

    /** Whether the trace has {@code free_completed} entries (then they, not the requests, free blocks). */
    public boolean hasCompletions() {
        return hasCompletions;
    }

    /** What trace entry {@code entry} frees: the ordinal of a window alloc, {@link #START_BLOCK} or {@link #NOTHING}. */
    public int of(int entry) {
        int c = code[entry];
        return c >= 2 ? c - 2 : c == 1 ? START_BLOCK : NOTHING;
    }

    /** Encodes a match for the builder's array: an alloc ordinal, {@link #START_BLOCK} or {@link #NOTHING}. */
    static int encode(int match) {
        return match >= 0 ? match + 2 : match == START_BLOCK ? 1 : 0;
    }
}
