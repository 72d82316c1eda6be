package io.gpumem.kvcache.tier;

/** A 128-bit chained block key as a map key of the tiers' indexes. */
record BlockKey(long hi, long lo) {
    /** 32 lower-case hex digits: file names and remote keys. */
    String hex() {
        return String.format("%016x%016x", hi, lo);
    }
}
