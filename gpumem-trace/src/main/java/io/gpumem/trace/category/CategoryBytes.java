package io.gpumem.trace.category;

/**
 * Allocated bytes split by {@link ByteCategory} at one moment of a window: just after trace entry {@code entry}
 * (−1: the window's start). The six figures sum to the allocated bytes at that moment ({@link #total()}).
 */
public record CategoryBytes(
        int entry,
        long parameters,
        long gradients,
        long optimizerState,
        long activations,
        long temporaries,
        long other) {

    static CategoryBytes of(int entry, long[] byOrdinal) {
        return new CategoryBytes(
                entry,
                byOrdinal[ByteCategory.PARAMETERS.ordinal()],
                byOrdinal[ByteCategory.GRADIENTS.ordinal()],
                byOrdinal[ByteCategory.OPTIMIZER_STATE.ordinal()],
                byOrdinal[ByteCategory.ACTIVATIONS.ordinal()],
                byOrdinal[ByteCategory.TEMPORARIES.ordinal()],
                byOrdinal[ByteCategory.OTHER.ordinal()]);
    }

    public long get(ByteCategory c) {
        return switch (c) {
            case PARAMETERS -> parameters;
            case GRADIENTS -> gradients;
            case OPTIMIZER_STATE -> optimizerState;
            case ACTIVATIONS -> activations;
            case TEMPORARIES -> temporaries;
            case OTHER -> other;
        };
    }

    /** Allocated bytes at this moment: the sum of the six categories. */
    public long total() {
        return parameters + gradients + optimizerState + activations + temporaries + other;
    }
}
