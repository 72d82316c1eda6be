package io.gpumem.trace.analysis;

import io.gpumem.engine.RunOutcome;

/**
 * One thing the user can do, with the bytes it saves and what the figure rests on.
 *
 * @param action     what to do, e.g. {@code PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True}
 * @param bytesSaved bytes saved (minimum capacity, else peak reserved, else bytes released now); may be 0 when the gain is an avoided OOM
 * @param basis      how the figure was obtained (a compare run's numbers, or the state's arithmetic)
 * @param outcome    the compare run behind it, or {@code null} when the figure comes from the state alone
 */
public record Recommendation(String action, long bytesSaved, String basis, RunOutcome outcome) {}
