package io.gpumem.trace.align;

import java.math.BigInteger;
import java.util.Locale;

/**
 * A request's size as an exact integer law of the labelled value {@code x} (the context length, the batch size):
 * one of {@link Form}, with integer coefficients. Recorded sizes are exact tensor sizes (elements times element
 * size), so a law either reproduces every recorded size exactly or does not hold; there is no tolerance.
 *
 * <p>{@link #fit} picks the simplest kind consistent with all the points given, in the order of {@link Form}; two
 * points decide any two-coefficient kind, so with two recordings the simplest consistent law is a choice (a size
 * that doubles from 128 to 256 is taken as linear, not affine), with three or more the points check it.
 *
 * @param kind the law's form
 * @param a    constant term
 * @param b    coefficient of {@code x}
 * @param c    coefficient of {@code x²}
 */
public record SizeLaw(Form kind, long a, long b, long c) {

    /** The forms tried, simplest first. */
    public enum Form {
        /** {@code a}: weights, optimizer state, anything that does not scale. */
        CONSTANT,
        /** {@code b·x}: activations proportional to the value. */
        LINEAR,
        /** {@code c·x²}: e.g. attention scores over a context of length x. */
        QUADRATIC,
        /** {@code a + b·x}. */
        AFFINE,
        /** {@code a + b·x + c·x²} (needs three points). */
        POLYNOMIAL;

        public String wireName() {
            return name().toLowerCase(Locale.ROOT);
        }
    }

    /** The size at {@code x}; {@link Long#MIN_VALUE} when it overflows a long. */
    public long at(long x) {
        try {
            // x * x alone overflows past about 3e9, which a law without a quadratic term must not care about
            long quadratic = c == 0 ? 0 : Math.multiplyExact(c, Math.multiplyExact(x, x));
            return Math.addExact(a, Math.addExact(Math.multiplyExact(b, x), quadratic));
        } catch (ArithmeticException e) {
            return Long.MIN_VALUE;
        }
    }

    /**
     * The simplest law through every point {@code (x[i], size[i])}, or {@code null} when none of the kinds fits
     * with integer coefficients. The {@code x} must be distinct.
     */
    public static SizeLaw fit(long[] x, long[] size) {
        int k = x.length;
        if (k == 0 || size.length != k) {
            throw new IllegalArgumentException("need as many sizes as values, at least one");
        }
        SizeLaw law = constant(size[0]);
        if (holds(law, x, size)) {
            return law;
        }
        if (k < 2) {
            return null;
        }
        if (x[0] != 0 && size[0] % x[0] == 0) {
            law = new SizeLaw(Form.LINEAR, 0, size[0] / x[0], 0);
            if (holds(law, x, size)) {
                return law;
            }
        }
        long x0sq = x[0] * x[0];
        if (x0sq != 0 && size[0] % x0sq == 0) {
            law = new SizeLaw(Form.QUADRATIC, 0, 0, size[0] / x0sq);
            if (holds(law, x, size)) {
                return law;
            }
        }
        long dx = x[1] - x[0];
        long ds = size[1] - size[0];
        if (dx != 0 && ds % dx == 0) {
            long b = ds / dx;
            law = new SizeLaw(Form.AFFINE, size[0] - b * x[0], b, 0);
            if (holds(law, x, size)) {
                return law;
            }
        }
        if (k >= 3) {
            law = polynomial(x, size);
            if (law != null && holds(law, x, size)) {
                return law;
            }
        }
        return null;
    }

    private static SizeLaw constant(long a) {
        return new SizeLaw(Form.CONSTANT, a, 0, 0);
    }

    private static boolean holds(SizeLaw law, long[] x, long[] size) {
        for (int i = 0; i < x.length; i++) {
            if (law.at(x[i]) != size[i]) {
                return false;
            }
        }
        return true;
    }

    /** The quadratic through the first three points, when its coefficients are integers (exact arithmetic). */
    private static SizeLaw polynomial(long[] x, long[] size) {
        BigInteger x0 = BigInteger.valueOf(x[0]);
        BigInteger x1 = BigInteger.valueOf(x[1]);
        BigInteger x2 = BigInteger.valueOf(x[2]);
        BigInteger y0 = BigInteger.valueOf(size[0]);
        BigInteger y1 = BigInteger.valueOf(size[1]);
        BigInteger y2 = BigInteger.valueOf(size[2]);
        // divided differences: c = ((y2-y0)/(x2-x0) - (y1-y0)/(x1-x0)) / (x2-x1), over a common denominator
        BigInteger d10 = x1.subtract(x0);
        BigInteger d20 = x2.subtract(x0);
        BigInteger d21 = x2.subtract(x1);
        if (d10.signum() == 0 || d20.signum() == 0 || d21.signum() == 0) {
            return null;
        }
        BigInteger num = y2.subtract(y0).multiply(d10).subtract(y1.subtract(y0).multiply(d20));
        BigInteger den = d10.multiply(d20).multiply(d21);
        if (num.mod(den.abs()).signum() != 0) {
            return null;
        }
        BigInteger c = num.divide(den);
        // b = (y1-y0)/(x1-x0) - c·(x1+x0)
        BigInteger rest = y1.subtract(y0).subtract(c.multiply(x1.multiply(x1).subtract(x0.multiply(x0))));
        if (rest.mod(d10.abs()).signum() != 0) {
            return null;
        }
        BigInteger b = rest.divide(d10);
        BigInteger a = y0.subtract(b.multiply(x0)).subtract(c.multiply(x0).multiply(x0));
        if (a.bitLength() > 63 || b.bitLength() > 63 || c.bitLength() > 63) {
            return null;
        }
        return new SizeLaw(Form.POLYNOMIAL, a.longValue(), b.longValue(), c.longValue());
    }

    @Override
    public String toString() {
        return switch (kind) {
            case CONSTANT -> Long.toString(a);
            case LINEAR -> b + "·x";
            case QUADRATIC -> c + "·x²";
            case AFFINE -> a + " + " + b + "·x";
            case POLYNOMIAL -> a + " + " + b + "·x + " + c + "·x²";
        };
    }
}
