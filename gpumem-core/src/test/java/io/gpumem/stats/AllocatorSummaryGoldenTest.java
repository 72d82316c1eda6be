package io.gpumem.stats;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpumem.alloc.CachingAllocator;
import io.gpumem.device.SimulatedDevice;
import org.junit.jupiter.api.Test;

/** allocator.md §8.3: the allocator's own stats after the §6.3 operations print exactly the documented table. */
class AllocatorSummaryGoldenTest {
    @Test
    void section63OperationsPrintTheSection83Table() {
        CachingAllocator a = new CachingAllocator(
                SimulatedDevice.builder().capacity(8L << 30).build());
        long pa = a.malloc(1000);
        long pb = a.malloc(3L << 20);
        a.malloc(25_000_000);
        a.free(pb);
        a.free(pa);
        assertThat(a.memorySummary(false)).isEqualTo(GoldenSummaries.SECTION_8_3);
    }
}
