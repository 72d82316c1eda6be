package io.gpumem.trace.category;

/**
 * The rule that gave a block its {@link ByteCategory}, with how sure it is. Rules read the block's phase (from its
 * stack frames, see {@link Phase}), where it was freed relative to the phases, and its size; none reads tensor
 * names, which a recording does not hold. Each rule gives exactly one category.
 */
public enum CategoryRule {
    /** Allocated and freed within one forward, backward or optimizer phase. */
    FREED_IN_ITS_PHASE,
    /** Allocated in forward, freed in the following backward, both in one step of the step structure. */
    SAVED_FOR_BACKWARD,
    /** As {@link #SAVED_FOR_BACKWARD}, but the free lies in a later step than the allocation. */
    SAVED_ACROSS_STEPS,
    /**
     * Allocated in forward and never freed, with an OOM later in the trace and no optimizer step between: the OOM cut
     * the step short before the backward that would free it (what is live at the failing request of a training OOM).
     */
    CUT_SHORT_BY_OOM,
    /** Allocated by backward (autograd engine or a backward frame) and live after that backward phase ended. */
    OUTLIVES_BACKWARD,
    /** Allocated in an optimizer step and live after it. */
    OUTLIVES_OPTIMIZER_STEP,
    /**
     * Allocated outside every phase (before recording began, or in setup code) and never freed in the window, and
     * a backward of one step allocates a gradient of its size for it.
     */
    MATCHES_A_GRADIENT,
    /** Without a phase, freed before the next request: too short-lived to span a phase. */
    FREED_BEFORE_NEXT_REQUEST,
    /** Live at the window's start: allocated before recording began, so no frames and no allocation time. */
    BEFORE_THE_WINDOW,
    /** The request carries no stack frames (recorded without context), so its phase is unknown. */
    NO_FRAMES,
    /** The frames name no forward, backward or optimizer step (data loading, setup, loss code). */
    NO_PHASE,
    /** The phase is known but the lifetime fits no rule (e.g. a forward output kept past the step). */
    NO_LIFETIME_RULE;

    /** How sure a rule is. */
    public enum Confidence {
        /** Phase read from frames and a lifetime that admits one reading. */
        HIGH,
        /** Phase from frames plus a lifetime that usually, not always, means this category. */
        MEDIUM,
        /** A lifetime alone. */
        LOW,
        /** No rule applied: the block is {@link ByteCategory#OTHER}. */
        NONE
    }

    public ByteCategory category() {
        return switch (this) {
            case FREED_IN_ITS_PHASE, FREED_BEFORE_NEXT_REQUEST -> ByteCategory.TEMPORARIES;
            case SAVED_FOR_BACKWARD, SAVED_ACROSS_STEPS, CUT_SHORT_BY_OOM -> ByteCategory.ACTIVATIONS;
            case OUTLIVES_BACKWARD -> ByteCategory.GRADIENTS;
            case OUTLIVES_OPTIMIZER_STEP -> ByteCategory.OPTIMIZER_STATE;
            case MATCHES_A_GRADIENT -> ByteCategory.PARAMETERS;
            case BEFORE_THE_WINDOW, NO_FRAMES, NO_PHASE, NO_LIFETIME_RULE -> ByteCategory.OTHER;
        };
    }

    public Confidence confidence() {
        return switch (this) {
            case FREED_IN_ITS_PHASE, SAVED_FOR_BACKWARD -> Confidence.HIGH;
            case SAVED_ACROSS_STEPS, OUTLIVES_BACKWARD, OUTLIVES_OPTIMIZER_STEP, MATCHES_A_GRADIENT ->
                Confidence.MEDIUM;
            case FREED_BEFORE_NEXT_REQUEST, CUT_SHORT_BY_OOM -> Confidence.LOW;
            case BEFORE_THE_WINDOW, NO_FRAMES, NO_PHASE, NO_LIFETIME_RULE -> Confidence.NONE;
        };
    }
}
