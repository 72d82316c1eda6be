package io.gpumem.kvcache.hash;

/** Block-hash algorithms for prefix caching. */
public enum HashAlgorithm {
    /** A fast 128-bit non-cryptographic multiply-rotate hash (default; a few ns per token). */
    FAST128,
    /** SHA-256 truncated to 128 bits, for deployments that want a cryptographic key (vLLM's default). */
    SHA256;

    /** Parses {@code fast128} / {@code sha256} (case-insensitive), naming the bad value otherwise. */
    public static HashAlgorithm parse(String s) {
        for (HashAlgorithm a : values()) {
            if (a.name().equalsIgnoreCase(s)) {
                return a;
            }
        }
        throw new IllegalArgumentException("unknown hash algorithm '" + s + "' (expected fast128 or sha256)");
    }
}
