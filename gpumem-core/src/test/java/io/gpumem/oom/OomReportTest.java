package io.gpumem.oom;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.List;
import org.junit.jupiter.api.Test;

/** The OOM report's derived figures and its PyTorch 2.3+ message (allocator.md §7.2). */
class OomReportTest {
    @Test
    void messageWithFraction() {
        OomReport r = new OomReport(
                1, 512, 2L << 20, 0, 80L << 30, 1L << 30, 40L << 30, 3L << 30, 5L << 30, List.of(), false);
        assertThat(r.message())
                .isEqualTo("CUDA out of memory. Tried to allocate 2.00 MiB. GPU 0 has a total capacity of"
                        + " 80.00 GiB of which 1024.00 MiB is free. 40.00 GiB allowed; Of the allocated memory 3.00 GiB is"
                        + " allocated by PyTorch, and 2.00 GiB is reserved by PyTorch but unallocated. If reserved but"
                        + " unallocated memory is large try setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid"
                        + " fragmentation.  See documentation for Memory Management "
                        + " (https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)");
        assertThat(r.heldOutside()).isEqualTo((80L << 30) - (1L << 30) - (5L << 30));
        assertThat(r.reservedButUnallocated()).isEqualTo(2L << 30);
        assertThat(r.fractionSet()).isTrue();
    }

    @Test
    void exabyteMessage() {
        OomReport r = new OomReport(1L << 60, 0, 0, 0, 80L << 30, 1L << 30, -1, 0, 0, List.of(), true);
        assertThat(r.message()).isEqualTo("CUDA out of memory. Tried to allocate more than 1EB memory.");
        assertThat(r.fractionSet()).isFalse();
    }
}
