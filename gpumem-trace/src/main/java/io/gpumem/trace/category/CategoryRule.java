package io.gpumem.trace.category;

/**
 * The rule that gave a block its {@link ByteCategory}, with how sure it is. Rules read the block's phase (from its
 * stack frames, see {@link Phase}), where it was freed relative to the phases, and its size; none reads tensor
 * names, which a recording does not hold.
 */
public enum CategoryRule {
    /** Allocated and freed within one forward, backward or optimizer phase. */
    FREED_IN_ITS_PHASE(ByteCategory.TEMPORARIES, Confidence.HIGH, "allocated and freed within one phase"),
    /** Allocated in forward, freed in the following backward, both in one step of the step structure. */
    SAVED_FOR_BACKWARD(
            ByteCategory.ACTIVATIONS, Confidence.HIGH, "allocated in forward, freed in the following backward"),
    /** As {@link #SAVED_FOR_BACKWARD}, but the free lies in a later step than the allocation. */
    SAVED_ACROSS_STEPS(
            ByteCategory.ACTIVATIONS,
            Confidence.MEDIUM,
            "allocated in forward, freed in the following backward of a later step"),
    /** Allocated by backward (autograd engine or a backward frame) and live after that backward phase ended. */
    OUTLIVES_BACKWARD(ByteCategory.GRADIENTS, Confidence.MEDIUM, "allocated by backward, live after it"),
    /** Allocated in an optimizer step and live after it. */
    OUTLIVES_OPTIMIZER_STEP(
            ByteCategory.OPTIMIZER_STATE, Confidence.MEDIUM, "allocated in an optimizer step, live after it"),
    /**
     * Allocated outside every phase (before recording began, or in setup code) and never freed in the window, and
     * a backward of one step allocates a gradient of its size for it.
     */
    MATCHES_A_GRADIENT(
            ByteCategory.PARAMETERS,
            Confidence.MEDIUM,
            "live throughout, outside every phase, one gradient of its size per backward"),
    /** Without a phase, freed before the next request: too short-lived to span a phase. */
    FREED_BEFORE_NEXT_REQUEST(ByteCategory.TEMPORARIES, Confidence.LOW, "freed before the next allocation request"),
    /** Live at the window's start: allocated before recording began, so no frames and no allocation time. */
    BEFORE_THE_WINDOW(ByteCategory.OTHER, Confidence.NONE, "allocated before recording began, no gradient of its size"),
    /** The request carries no stack frames (recorded without context), so its phase is unknown. */
    NO_FRAMES(ByteCategory.OTHER, Confidence.NONE, "recorded without stack frames"),
    /** The frames name no forward, backward or optimizer step (data loading, setup, loss code). */
    NO_PHASE(ByteCategory.OTHER, Confidence.NONE, "frames name no forward, backward or optimizer phase"),
    /** The phase is known but the lifetime fits no rule (e.g. a forward output kept past the step). */
    NO_LIFETIME_RULE(ByteCategory.OTHER, Confidence.NONE, "phase known, lifetime fits no rule");

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

    private final ByteCategory category;
    private final Confidence confidence;
    private final String description;

    CategoryRule(ByteCategory category, Confidence confidence, String description) {
        this.category = category;
        this.confidence = confidence;
        this.description = description;
    }

    public ByteCategory category() {
        return category;
    }

    public Confidence confidence() {
        return confidence;
    }

    /** One line saying what the rule saw. */
    public String description() {
        return description;
    }
}
