package io.gpumem.trace.workload;

/** What a generated allocation stands for; the snapshot names blocks by it and reports group bytes by it. */
public enum TensorKind {
    /** Model parameters: allocated once, live to the end. */
    WEIGHT,
    /** AdamW's exp_avg / exp_avg_sq: allocated lazily at the first optimizer step, live to the end. */
    OPTIMIZER_STATE,
    /** Saved forward activations: allocated in forward, freed in backward. */
    ACTIVATION,
    /** Parameter gradients: allocated in backward, freed by zero_grad(set_to_none=True). */
    GRADIENT,
    /** Short-lived temporaries: activation gradients, optimizer scratch, pre-residual outputs. */
    TEMPORARY,
    /** Input token ids of a step. */
    INPUT
}
