package io.gpumem.alloc;

import static io.gpumem.testing.TestSizes.MiB;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.gpumem.config.AllocatorConfig;
import io.gpumem.device.SimulatedDevice;
import io.gpumem.stats.MemoryStats;
import io.gpumem.stats.StatKind;
import io.gpumem.stats.StatType;
import java.util.Map;
import org.junit.jupiter.api.Test;

/** The user API: try-with-resources, the typed stats value against PyTorch's keys, every call after close. */
class GpuAllocatorApiTest {

    @Test
    void closeReturnsTheCacheAndRetiresTheAllocator() {
        SimulatedDevice device = SimulatedDevice.withCapacity(1L << 30);
        CachingAllocator kept;
        long live;
        try (var allocator = new CachingAllocator(device)) {
            long p = allocator.malloc(3 * MiB);
            live = allocator.malloc(30 * MiB);
            allocator.free(p);
            assertThat(allocator.stats().reservedBytes()).isEqualTo(50 * MiB);
            kept = allocator;
        }
        // the free 20 MiB segment went back to the device; the live block stays with its user
        assertThat(kept.stats().reservedBytes()).isEqualTo(30 * MiB);
        assertThat(device.freeMemory()).isEqualTo((1L << 30) - 30 * MiB);
        assertThatThrownBy(() -> kept.malloc(MiB))
                .isInstanceOf(IllegalStateException.class)
                .hasMessageContaining("closed");
        assertThatThrownBy(() -> kept.free(live)).isInstanceOf(IllegalStateException.class);
        assertThatThrownBy(() -> kept.recordStream(live, device.createStream()))
                .isInstanceOf(IllegalStateException.class)
                .hasMessageContaining("closed");
        assertThatThrownBy(kept::emptyCache)
                .isInstanceOf(IllegalStateException.class)
                .hasMessageContaining("closed");
        kept.close(); // idempotent
        // the capacity search's malloc-and-free shortcut is refused too, not answered from a retired cache
        CachingAllocator probe = CachingAllocator.uncounted(device, AllocatorConfig.defaults());
        probe.free(probe.malloc(MiB)); // a cached block that would serve the pair
        assertThat(probe.tryMallocFreedAtOnce(MiB, 0)).isTrue();
        probe.close();
        assertThatThrownBy(() -> probe.tryMallocFreedAtOnce(MiB, 0))
                .isInstanceOf(IllegalStateException.class)
                .hasMessageContaining("closed");
    }

    @Test
    void typedStatsAgreeWithPyTorchsKeys() {
        CachingAllocator a = new CachingAllocator(SimulatedDevice.withCapacity(1L << 30));
        long small = a.malloc(1000);
        long large = a.malloc(5 * MiB);
        a.free(small);
        MemoryStats s = a.stats();
        Map<String, Long> m = s.toPyTorchMap();
        assertThat(m).isEqualTo(a.stats().toPyTorchMap());
        for (StatKind kind : StatKind.values()) {
            for (StatType type : StatType.values()) {
                String key = kind.key() + "." + type.key() + ".";
                MemoryStats.Stat stat = s.get(kind, type);
                assertThat(stat.current()).as(key).isEqualTo(m.get(key + "current"));
                assertThat(stat.peak()).as(key).isEqualTo(m.get(key + "peak"));
                assertThat(stat.allocated()).as(key).isEqualTo(m.get(key + "allocated"));
                assertThat(stat.freed()).as(key).isEqualTo(m.get(key + "freed"));
            }
        }
        assertThat(s.get(StatKind.ALLOCATION, StatType.SMALL_POOL).freed()).isEqualTo(1);
        assertThat(s.get(StatKind.SEGMENT).current()).isEqualTo(2);
        assertThat(s.allocatedBytes()).isEqualTo(a.allocatedBytes()).isEqualTo(5 * MiB);
        assertThat(s.numDeviceAlloc()).isEqualTo(m.get("num_device_alloc")).isEqualTo(2);
        assertThat(s.maxSplitSize()).isEqualTo(-1);
        assertThat(m).hasSize(9 * 3 * 4 + 2 * 4 + 6);
        // a value: equal figures are equal, a later change is not seen by an earlier copy
        assertThat(a.stats()).isEqualTo(s).hasSameHashCodeAs(s);
        a.free(large);
        assertThat(s.allocatedBytes()).isEqualTo(5 * MiB);
        assertThat(a.stats()).isNotEqualTo(s);
    }

    @Test
    void theInterfaceIsEnoughForAUser() {
        try (GpuAllocator a = new CachingAllocator(SimulatedDevice.withCapacity(1L << 30))) {
            long p = a.malloc(4096);
            a.recordStream(p, 0);
            a.free(p);
            a.emptyCache();
            assertThat(a.stats().reservedBytes()).isZero();
            assertThat(a.snapshot().segments()).isEmpty();
        }
    }
}
