package io.gpumem.oom;

import static io.gpumem.testing.TestSizes.GiB;
import static io.gpumem.testing.TestSizes.MiB;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import org.junit.jupiter.api.Test;

class OomMessagesTest {

    @Test
    void plainMessageWithoutFractionOrPrivatePools() {
        String m = OomMessages.message(0, 20 * MiB, 80 * GiB, 10 * MiB, -1, 70 * GiB, 75 * GiB, 0);
        assertThat(m)
                .isEqualTo(
                        "CUDA out of memory. Tried to allocate 20.00 MiB. GPU 0 has a total capacity of"
                                + " 80.00 GiB of which 10.00 MiB is free. Of the allocated memory 70.00 GiB is allocated by PyTorch,"
                                + " and 5.00 GiB is reserved by PyTorch but unallocated. If reserved but unallocated memory is large"
                                + " try setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  See"
                                + " documentation for Memory Management  (https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)");
    }

    @Test
    void fractionAddsTheAllowedMaximum() {
        String m = OomMessages.message(1, 2 * MiB, 8 * GiB, 7 * GiB, 4 * GiB, 3 * GiB, 4 * GiB - 512 * 1024, 0);
        assertThat(m)
                .startsWith("CUDA out of memory. Tried to allocate 2.00 MiB. GPU 1 has a total capacity of 8.00 GiB"
                        + " of which 7.00 GiB is free. 4.00 GiB allowed; Of the allocated memory 3.00 GiB is allocated by"
                        + " PyTorch, and 1023.50 MiB is reserved by PyTorch but unallocated. If reserved");
    }

    @Test
    void zeroAllowedMaximumIsStillPrinted() {
        // A fraction of 0 is legal in PyTorch and gives "0 bytes allowed; ".
        assertThat(OomMessages.message(0, 2 * MiB, GiB, GiB, 0, 0, 0, 0)).contains("is free. 0 bytes allowed; Of the");
    }

    @Test
    void privatePoolsAreCountedAsAllocatedAndNamed() {
        String m = OomMessages.message(0, 200 * MiB, 47 * GiB, 896 * 1024, -1, 10 * GiB, 12 * GiB, GiB);
        assertThat(m)
                .contains(
                        "Of the allocated memory 11.00 GiB is allocated by PyTorch, with 1024.00 MiB allocated in"
                                + " private pools (e.g., CUDA Graphs), and 1024.00 MiB is reserved by PyTorch but unallocated.");
        assertThat(m).contains("of which 896.00 KiB is free. Of");
    }

    @Test
    void hintKeepsItsDoubleSpaces() {
        String m = OomMessages.message(0, 512, 1024, 0, -1, 0, 0, 0);
        assertThat(m).contains("fragmentation.  See documentation for Memory Management  (https://");
        assertThat(m).contains("Tried to allocate 512 bytes.");
        assertThat(m).endsWith("#environment-variables)");
    }

    @Test
    void inconsistentFiguresAreRejected() {
        assertThatThrownBy(() -> OomMessages.message(0, 512, 1024, 0, -1, 100, 50, 0))
                .isInstanceOf(IllegalArgumentException.class)
                .hasMessageContaining("reserved=50");
        assertThatThrownBy(() -> OomMessages.message(0, 512, 1024, 0, -1, 100, 150, 60))
                .isInstanceOf(IllegalArgumentException.class)
                .hasMessageContaining("private pools=60");
    }
}
