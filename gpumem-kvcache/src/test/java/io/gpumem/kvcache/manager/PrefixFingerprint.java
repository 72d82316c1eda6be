package io.gpumem.kvcache.manager;

/**
 * Test stand-in for a position's KV: an FNV-1a hash of the request's tokens up to and including that
 * position. Two positions get the same fingerprint only when their whole prefixes are equal, which is exactly
 * when real KV may be shared; so reading back a wrong block (stale hit, missed copy) shows up as a mismatch.
 */
public final class PrefixFingerprint {
    private PrefixFingerprint() {}

    public static long of(KvRequest r, int position) {
        long h = 0xCBF29CE484222325L;
        for (int i = 0; i <= position; i++) {
            h = (h ^ r.token(i)) * 0x100000001B3L;
        }
        return h;
    }
}
