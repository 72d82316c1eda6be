package io.gpumem.kvcache.hash;

import java.security.DigestException;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;

/**
 * SHA-256 block hasher (vLLM's default algorithm): digests parent key (16 bytes), extra key (8 bytes)
 * and the tokens (4 bytes each, little-endian) and keeps the first 128 bits of the digest as the key.
 * Reuses its digest, input and output buffers, so it allocates nothing per call.
 */
final class Sha256Hasher extends SeededHasher {
    private final MessageDigest digest;
    private final byte[] digestOut = new byte[32];
    private byte[] input = new byte[24 + 4 * 64];

    Sha256Hasher(long seed) {
        super("sha256");
        try {
            this.digest = MessageDigest.getInstance("SHA-256");
        } catch (NoSuchAlgorithmException e) {
            throw new IllegalStateException("SHA-256 is not available in this JVM", e);
        }
        long[] out = new long[2];
        hash(seed, ~seed, new int[0], 0, 0, 0, out);
        root(out[0], out[1]);
    }

    @Override
    public void hash(long parentHi, long parentLo, int[] tokens, int offset, int count, long extraKey, long[] out) {
        int len = 24 + 4 * count;
        if (input.length < len) {
            input = new byte[len];
        }
        byte[] in = input;
        putLong(in, 0, parentHi);
        putLong(in, 8, parentLo);
        putLong(in, 16, extraKey);
        int p = 24;
        for (int i = offset, end = offset + count; i < end; i++) {
            int t = tokens[i];
            in[p] = (byte) t;
            in[p + 1] = (byte) (t >>> 8);
            in[p + 2] = (byte) (t >>> 16);
            in[p + 3] = (byte) (t >>> 24);
            p += 4;
        }
        digest.update(in, 0, len);
        try {
            digest.digest(digestOut, 0, 32);
        } catch (DigestException e) {
            throw new IllegalStateException(e);
        }
        out[0] = getLong(digestOut, 0);
        out[1] = getLong(digestOut, 8);
    }

    private static void putLong(byte[] b, int off, long v) {
        for (int i = 0; i < 8; i++) {
            b[off + i] = (byte) (v >>> (8 * i));
        }
    }

    private static long getLong(byte[] b, int off) {
        long v = 0;
        for (int i = 7; i >= 0; i--) {
            v = (v << 8) | (b[off + i] & 0xFF);
        }
        return v;
    }
}
