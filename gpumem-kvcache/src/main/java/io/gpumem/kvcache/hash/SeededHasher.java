package io.gpumem.kvcache.hash;

/**
 * What every {@link BlockHasher} keeps besides its mixing: its name and the root key a seed fixes (the parent
 * of block 0). Each constructor derives the root from its seed with its own algorithm and sets it once, with
 * {@link #root}, before the hasher is handed out; it never changes afterwards.
 */
abstract sealed class SeededHasher implements BlockHasher permits Fast128Hasher, Sha256Hasher {
    private final String name;
    private long rootHi;
    private long rootLo;

    SeededHasher(String name) {
        this.name = name;
    }

    /** Sets the root key; called once, from the subclass constructor. */
    final void root(long hi, long lo) {
        rootHi = hi;
        rootLo = lo;
    }

    @Override
    public final long rootHi() {
        return rootHi;
    }

    @Override
    public final long rootLo() {
        return rootLo;
    }

    @Override
    public final String name() {
        return name;
    }
}
