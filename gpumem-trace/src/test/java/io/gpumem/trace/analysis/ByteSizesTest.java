package io.gpumem.trace.analysis;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import org.junit.jupiter.api.Test;

class ByteSizesTest {
    @Test
    void formatsLikePytorch() {
        assertThat(ByteSizes.format(1024)).isEqualTo("1024 bytes");
        assertThat(ByteSizes.format(1L << 20)).isEqualTo("1024.00 KiB");
        assertThat(ByteSizes.format(2L << 20)).isEqualTo("2.00 MiB");
        assertThat(ByteSizes.format(5308694528L)).isEqualTo("4.94 GiB");
        assertThat(ByteSizes.format(-(2L << 20))).isEqualTo("-2.00 MiB");
    }

    @Test
    void parsesSizesWithUnits() {
        assertThat(ByteSizes.parse("24GiB")).isEqualTo(24L << 30);
        assertThat(ByteSizes.parse("1.5 g")).isEqualTo(3L << 29);
        assertThat(ByteSizes.parse("512MB")).isEqualTo(512L << 20);
        assertThat(ByteSizes.parse("4096")).isEqualTo(4096);
        assertThatThrownBy(() -> ByteSizes.parse("lots")).hasMessageContaining("'lots' is not a size");
        assertThatThrownBy(() -> ByteSizes.parse("3 parsecs")).hasMessageContaining("unknown unit");
        assertThatThrownBy(() -> ByteSizes.parse("0")).hasMessageContaining("out of range");
        assertThat(ByteSizes.parseNonNegative("0GiB")).isZero();
        assertThatThrownBy(() -> ByteSizes.parseNonNegative("-1")).hasMessageContaining("not a size");
    }
}
