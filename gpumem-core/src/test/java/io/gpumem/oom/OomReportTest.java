package io.gpumem.oom;

import org.junit.jupiter.api.Test;

import java.util.List;

import static org.assertj.core.api.Assertions.assertThat;

/** PyTorch's {@code format_size} (spec §7.1) and the 2.3+ message layout (spec §7.2). */
class OomReportTest {
    @Test
    void formatSizeThresholdsAreInclusive() {
        assertThat(OomReport.formatSize(0)).isEqualTo("0 bytes");
        assertThat(OomReport.formatSize(1024)).isEqualTo("1024 bytes");
        assertThat(OomReport.formatSize(1025)).isEqualTo("1.00 KiB");
        assertThat(OomReport.formatSize(1_048_576)).isEqualTo("1024.00 KiB");
        assertThat(OomReport.formatSize(2L << 20)).isEqualTo("2.00 MiB");
        assertThat(OomReport.formatSize(1L << 30)).isEqualTo("1024.00 MiB");
        assertThat(OomReport.formatSize(80L << 30)).isEqualTo("80.00 GiB");
        // 1.125 KiB = 1152 bytes is an exact binary half: printf rounds it to even ("1.12"), not up
        assertThat(OomReport.formatSize(1152)).isEqualTo("1.12 KiB");
        assertThat(OomReport.formatSize(1157)).isEqualTo("1.13 KiB");
        assertThat(OomReport.formatSize(1_310_720)).isEqualTo("1.25 MiB");
    }

    @Test
    void messageWithFraction() {
        OomReport r = new OomReport(1, 512, 2L << 20, 0, 80L << 30, 1L << 30, 40L << 30, 3L << 30, 5L << 30,
                List.of(), false);
        assertThat(r.message()).isEqualTo("CUDA out of memory. Tried to allocate 2.00 MiB. GPU 0 has a total capacity of"
                + " 80.00 GiB of which 1024.00 MiB is free. 40.00 GiB allowed; Of the allocated memory 3.00 GiB is"
                + " allocated by PyTorch, and 2.00 GiB is reserved by PyTorch but unallocated. If reserved but"
                + " unallocated memory is large try setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid"
                + " fragmentation.  See documentation for Memory Management "
                + " (https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)");
        assertThat(r.heldOutside()).isEqualTo((80L << 30) - (1L << 30) - (5L << 30));
        assertThat(r.reservedButUnallocated()).isEqualTo(2L << 30);
    }
}
