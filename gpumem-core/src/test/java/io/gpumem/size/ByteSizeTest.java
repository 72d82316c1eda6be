package io.gpumem.size;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import org.junit.jupiter.api.Test;

class ByteSizeTest {

    @Test
    void plainBytesAndBinaryUnits() {
        assertThat(ByteSize.parse("1000")).isEqualTo(1000);
        assertThat(ByteSize.parse("25_000_000")).isEqualTo(25_000_000);
        assertThat(ByteSize.parse("512B")).isEqualTo(512);
        assertThat(ByteSize.parse("4KiB")).isEqualTo(4096);
        assertThat(ByteSize.parse("3MiB")).isEqualTo(3L << 20);
        assertThat(ByteSize.parse("80GiB")).isEqualTo(80L << 30);
        assertThat(ByteSize.parse("2TiB")).isEqualTo(2L << 40);
        assertThat(ByteSize.parse("0")).isZero();
    }

    @Test
    void decimalUnitsAreRejectedWithAHint() {
        for (String s : new String[] {"3MB", "3M", "3KB", "3GB", "3k", "3mib"}) {
            assertThatThrownBy(() -> ByteSize.parse(s))
                    .isInstanceOf(IllegalArgumentException.class)
                    .hasMessageContaining("'" + s + "'")
                    .hasMessageContaining("KiB, MiB, GiB or TiB");
        }
    }

    @Test
    void garbageIsRejected() {
        for (String s : new String[] {"", "MiB", "abc", "-5", "1.5GiB", "_1", "1_", "3 MiB", "3XiB"}) {
            assertThatThrownBy(() -> ByteSize.parse(s))
                    .as(s)
                    .isInstanceOf(IllegalArgumentException.class)
                    .hasMessageContaining("bad size");
        }
    }

    @Test
    void onlyAsciiDigitsMakeASize() {
        // Arabic-Indic 10, fullwidth 3KiB, Devanagari 5: Long.parseLong reads them all, the script grammar does not
        for (String s : new String[] {"\u0661\u0660", "\uFF13KiB", "\u096B", "1\u0660"}) {
            assertThatThrownBy(() -> ByteSize.parse(s))
                    .as(s)
                    .isInstanceOf(IllegalArgumentException.class)
                    .hasMessageContaining("bad size '" + s + "'");
        }
    }

    @Test
    void overflowIsRejected() {
        assertThat(ByteSize.parse("9223372036854775807")).isEqualTo(Long.MAX_VALUE);
        assertThatThrownBy(() -> ByteSize.parse("9223372036854775808")).hasMessageContaining("too large");
        assertThatThrownBy(() -> ByteSize.parse("8388608TiB")).hasMessageContaining("too large");
        assertThat(ByteSize.parse("8388607TiB")).isEqualTo(8388607L << 40);
    }

    @Test
    void positiveSizesRejectZeroAndDoubledUnderscores() {
        assertThat(ByteSize.parsePositive("1KiB")).isEqualTo(1024);
        assertThatThrownBy(() -> ByteSize.parsePositive("0GiB"))
                .hasMessageContaining("'0GiB'")
                .hasMessageContaining("more than 0");
        assertThatThrownBy(() -> ByteSize.parse("1__0")).hasMessageContaining("bad size");
    }

    @Test
    void signedFormatPutsTheMinusBeforeTheMagnitude() {
        assertThat(ByteSize.formatSigned(-(2L << 20))).isEqualTo("-2.00 MiB");
        assertThat(ByteSize.formatSigned(1024)).isEqualTo("1024 bytes");
    }

    @Test
    void changeFormatAlwaysCarriesItsSign() {
        assertThat(ByteSize.formatChange(-(2L << 20))).isEqualTo("-2.00 MiB");
        assertThat(ByteSize.formatChange(3L << 30)).isEqualTo("+3.00 GiB");
        assertThat(ByteSize.formatChange(0)).isEqualTo("+0 bytes");
    }
}
