package io.gpumem.size;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import org.junit.jupiter.api.Test;

class ByteSizeFormatTest {

    @Test
    void bytesUpToAndIncluding1024() {
        assertThat(ByteSize.format(0)).isEqualTo("0 bytes");
        assertThat(ByteSize.format(512)).isEqualTo("512 bytes");
        assertThat(ByteSize.format(1024)).isEqualTo("1024 bytes");
    }

    @Test
    void kibUpToAndIncludingOneMiB() {
        assertThat(ByteSize.format(1025)).isEqualTo("1.00 KiB");
        assertThat(ByteSize.format(1536)).isEqualTo("1.50 KiB");
        assertThat(ByteSize.format(1_048_575)).isEqualTo("1024.00 KiB");
        // allocator.md §7.1: the comparison is "<=", so exactly 1 MiB is still KiB.
        assertThat(ByteSize.format(1_048_576)).isEqualTo("1024.00 KiB");
    }

    @Test
    void mibUpToAndIncludingOneGiB() {
        assertThat(ByteSize.format(1_048_577)).isEqualTo("1.00 MiB");
        assertThat(ByteSize.format(2L << 20)).isEqualTo("2.00 MiB");
        assertThat(ByteSize.format(25_165_824)).isEqualTo("24.00 MiB");
        assertThat(ByteSize.format(1L << 30)).isEqualTo("1024.00 MiB");
    }

    @Test
    void gibAboveOneGiB() {
        assertThat(ByteSize.format((1L << 30) + 1)).isEqualTo("1.00 GiB");
        assertThat(ByteSize.format(80L << 30)).isEqualTo("80.00 GiB");
        assertThat(ByteSize.format(150_754_820_096L)).isEqualTo("140.40 GiB");
    }

    @Test
    void exactTiesRoundHalfToEvenLikeCStreams() {
        // 1152 / 1024 = 1.125 exactly: std::fixed prints 1.12; Java's %.2f would print 1.13.
        assertThat(ByteSize.format(1152)).isEqualTo("1.12 KiB");
        // 1.375 -> 1.38 (the even neighbour is above).
        assertThat(ByteSize.format(1408)).isEqualTo("1.38 KiB");
        // Not a tie: 1.0048828125 -> 1.00.
        assertThat(ByteSize.format(1029)).isEqualTo("1.00 KiB");
    }

    @Test
    void negativeIsRejected() {
        assertThatThrownBy(() -> ByteSize.format(-1))
                .isInstanceOf(IllegalArgumentException.class)
                .hasMessageContaining("-1");
    }
}
