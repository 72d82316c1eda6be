package io.gpumem.trace.align;

import static org.assertj.core.api.Assertions.assertThat;

import org.junit.jupiter.api.Test;

/** The simplest exact integer law through the recorded points, or none. */
class SizeLawTest {

    @Test
    void picksTheSimplestLawThatHolds() {
        assertThat(SizeLaw.fit(new long[] {128, 256}, new long[] {4096, 4096}).kind())
                .isEqualTo(SizeLaw.Form.CONSTANT);
        assertThat(SizeLaw.fit(new long[] {128, 256}, new long[] {2048, 4096}).kind())
                .isEqualTo(SizeLaw.Form.LINEAR);
        SizeLaw q = SizeLaw.fit(new long[] {128, 256}, new long[] {4L * 128 * 128, 4L * 256 * 256});
        assertThat(q.kind()).isEqualTo(SizeLaw.Form.QUADRATIC);
        assertThat(q.at(512)).isEqualTo(4L * 512 * 512);
        SizeLaw affine = SizeLaw.fit(new long[] {128, 256}, new long[] {1000 + 3 * 128, 1000 + 3 * 256});
        assertThat(affine).isEqualTo(new SizeLaw(SizeLaw.Form.AFFINE, 1000, 3, 0));
        assertThat(affine.at(1)).isEqualTo(1003);
    }

    @Test
    void threePointsDecideAPolynomialAndRejectWhatNoLawFits() {
        long[] x = {2, 3, 5};
        long[] s = new long[3];
        for (int i = 0; i < 3; i++) {
            s[i] = 7 + 5 * x[i] + 11 * x[i] * x[i];
        }
        assertThat(SizeLaw.fit(x, s)).isEqualTo(new SizeLaw(SizeLaw.Form.POLYNOMIAL, 7, 5, 11));
        // a step in the sizes (another kernel's workspace past a threshold): no integer law through all three
        assertThat(SizeLaw.fit(new long[] {128, 256, 512}, new long[] {1024, 2048, 1_000_003}))
                .isNull();
        // a slope that is not an integer
        assertThat(SizeLaw.fit(new long[] {2, 5}, new long[] {10, 11})).isNull();
    }

    @Test
    void overflowIsReportedNotWrapped() {
        SizeLaw law = new SizeLaw(SizeLaw.Form.QUADRATIC, 0, 0, Long.MAX_VALUE / 4);
        assertThat(law.at(4)).isEqualTo(Long.MIN_VALUE);
        assertThat(new SizeLaw(SizeLaw.Form.QUADRATIC, 0, 0, 1).at(3_037_000_500L))
                .as("x * x past 2^63")
                .isEqualTo(Long.MIN_VALUE);
    }

    /** x * x overflows past about 3e9; a law without a quadratic term is exact far beyond. */
    @Test
    void lawsWithoutAQuadraticTermHoldWhereTheSquareOfTheValueWouldOverflow() {
        long x = 1L << 40;
        assertThat(new SizeLaw(SizeLaw.Form.CONSTANT, 512, 0, 0).at(x)).isEqualTo(512);
        assertThat(new SizeLaw(SizeLaw.Form.LINEAR, 0, 4096, 0).at(x)).isEqualTo(4096L << 40);
        assertThat(new SizeLaw(SizeLaw.Form.AFFINE, 1024, 2, 0).at(x)).isEqualTo(1024 + (2L << 40));
        assertThat(new SizeLaw(SizeLaw.Form.LINEAR, 0, 1L << 24, 0).at(x))
                .as("b * x past 2^63")
                .isEqualTo(Long.MIN_VALUE);
    }
}
