package io.gpumem.trace.category;

/**
 * One remedy for what fills the peak, with what it would save there.
 *
 * @param target       what it shrinks: a {@link ByteCategory#key()}, or {@code fragmentation}
 * @param remedy       what to do, in a few words
 * @param saves        bytes it would take off peak allocated (for fragmentation: off what the device must hold, the
 *                     recommender's compare-run figure)
 * @param model        how {@code saves} was estimated, with the assumptions that make it an estimate
 * @param pytorchToday whether a PyTorch user can apply it today with a setting or a one-line change (a package
 *                     such as bitsandbytes counts; a framework such as DeepSpeed or a gpumem policy does not)
 * @param how          the setting or the line of code
 */
public record CategoryRemedy(
        String target, String remedy, long saves, String model, boolean pytorchToday, String how) {}
