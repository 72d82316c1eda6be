package io.gpumem.trace.category;

import java.util.Locale;

/**
 * What an allocated byte is for, as far as a recording can tell without the autograd graph (see
 * {@link ByteCategories} for the rules that assign one). {@link #OTHER} is an honest answer, not a failure.
 */
public enum ByteCategory {
    /** Model weights: allocated outside any phase, live throughout, one gradient of their size per backward. */
    PARAMETERS,
    /** Parameter gradients: allocated by backward and outliving it (freed by {@code zero_grad} or kept). */
    GRADIENTS,
    /** Optimizer state (AdamW's exp_avg and exp_avg_sq): allocated in an optimizer step and outliving it. */
    OPTIMIZER_STATE,
    /** Tensors saved for backward: allocated in a forward phase, freed in the following backward. */
    ACTIVATIONS,
    /** Short-lived tensors: allocated and freed within one phase. */
    TEMPORARIES,
    /** Everything no rule classifies: blocks without frames, data batches, outputs kept past the step. */
    OTHER;

    /** The name as JSON and printed output spell it: {@code optimizer_state}. */
    public String key() {
        return name().toLowerCase(Locale.ROOT);
    }
}
