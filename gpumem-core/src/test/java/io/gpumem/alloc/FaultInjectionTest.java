package io.gpumem.alloc;

import static io.gpumem.testing.TestConfigs.expandable;
import static io.gpumem.testing.TestSizes.MiB;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.gpumem.device.DeviceError;
import io.gpumem.device.DeviceException;
import io.gpumem.device.DeviceOp;
import io.gpumem.device.SimulatedDevice;
import io.gpumem.history.HistoryOptions;
import io.gpumem.history.TraceAction;
import io.gpumem.history.TraceEntry;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/** Driver failures in the middle of allocator operations leave a consistent state and the right stats. */
class FaultInjectionTest {

    private static SimulatedDevice device() {
        return SimulatedDevice.builder().capacity(8L << 30).build();
    }

    @Test
    void createOomMidGrowthReleasesThisCallsHandlesThenRetrySucceeds() {
        SimulatedDevice dev = device();
        CachingAllocator a = new CachingAllocator(dev, expandable());
        dev.failNth(DeviceOp.CREATE_PHYSICAL, 2, DeviceError.CUDA_ERROR_OUT_OF_MEMORY);
        long p = a.malloc(50 * MiB); // 3 pages in one map call; the 2nd create fails
        Map<String, Long> s = a.stats().toPyTorchMap();
        assertThat(s.get("num_alloc_retries")).isEqualTo(1);
        assertThat(s.get("reserved_bytes.all.current")).isEqualTo(60 * MiB);
        assertThat(s.get("num_device_alloc")).isEqualTo(1);
        assertThat(dev.physicalHandleCount()).isEqualTo(3);
        assertThat(dev.mappingCount()).isEqualTo(3);
        a.internals().checkInvariants();
        a.free(p);
        a.emptyCache();
        assertThat(dev.physicalHandleCount()).isZero();
        assertThat(dev.reservationCount()).isZero();
        a.internals().checkInvariants();
    }

    @Test
    void mapFailureRollsBackAndPropagates() {
        SimulatedDevice dev = device();
        CachingAllocator a = new CachingAllocator(dev, expandable());
        dev.failNth(DeviceOp.MAP, 2, DeviceError.CUDA_ERROR_INVALID_VALUE);
        assertThatThrownBy(() -> a.malloc(50 * MiB))
                .isInstanceOfSatisfying(
                        DeviceException.class,
                        e -> assertThat(e.error()).isEqualTo(DeviceError.CUDA_ERROR_INVALID_VALUE));
        assertThat(dev.mappingCount()).isZero();
        assertThat(dev.physicalHandleCount()).isZero();
        assertThat(a.reservedBytes()).isZero();
        assertThat(a.stats().toPyTorchMap().get("num_device_alloc")).isZero();
        a.internals().checkInvariants();
        long p = a.malloc(50 * MiB);
        assertThat(a.reservedBytes()).isEqualTo(60 * MiB);
        a.free(p);
        a.internals().checkInvariants();
    }

    @Test
    void setAccessFailureRollsBackMappings() {
        SimulatedDevice dev = device();
        CachingAllocator a = new CachingAllocator(dev, expandable());
        dev.failNth(DeviceOp.SET_ACCESS, 1, DeviceError.CUDA_ERROR_NOT_PERMITTED);
        assertThatThrownBy(() -> a.malloc(MiB)).isInstanceOf(DeviceException.class);
        assertThat(dev.mappingCount()).isZero();
        assertThat(dev.physicalHandleCount()).isZero();
        a.internals().checkInvariants();
    }

    @Test
    void pagesMappedByAnEarlierCallOfTheSameMallocStayMapped() {
        SimulatedDevice dev = device();
        CachingAllocator a = new CachingAllocator(dev, expandable());
        a.recordHistory(HistoryOptions.all());
        long x = a.malloc(20 * MiB); // page 0
        long y = a.malloc(20 * MiB); // page 1
        long z = a.malloc(20 * MiB); // page 2
        a.free(y);
        a.emptyCache(); // page 1 unmapped: [x][gap][z][tail]
        a.free(z); // z free, mapped
        // 50 MiB: candidate = the gap (x is allocated); map 20 MiB (call 1) merges with z, then the tail (call 2)
        dev.failNth(DeviceOp.CREATE_PHYSICAL, 2, DeviceError.CUDA_ERROR_OUT_OF_MEMORY);
        long p = a.malloc(50 * MiB);
        assertThat(a.stats().toPyTorchMap().get("num_alloc_retries")).isEqualTo(1);
        List<TraceEntry> t = a.snapshot().deviceTraces().getFirst();
        List<TraceAction> acts = t.stream().map(TraceEntry::action).toList();
        int firstMap = acts.lastIndexOf(TraceAction.FREE_COMPLETED) + 1;
        assertThat(acts.subList(firstMap, acts.size())).startsWith(TraceAction.SEGMENT_MAP, TraceAction.SEGMENT_UNMAP);
        assertThat(t.get(firstMap).addr()).isEqualTo(x + 20 * MiB);
        assertThat(p).isEqualTo(x + 20 * MiB);
        a.internals().checkInvariants();
    }

    @Test
    void unmapFailurePartWayAccountsThePagesThatWent() {
        SimulatedDevice dev = device();
        CachingAllocator a = new CachingAllocator(dev, expandable());
        a.free(a.malloc(50 * MiB)); // 3 pages mapped, all free
        dev.failNth(DeviceOp.UNMAP, 2, DeviceError.CUDA_ERROR_INVALID_VALUE);
        assertThatThrownBy(a::emptyCache).isInstanceOf(DeviceException.class);
        assertThat(a.reservedBytes()).isEqualTo(40 * MiB); // the first page went, the other two stay
        assertThat(a.stats().toPyTorchMap().get("num_device_free")).isEqualTo(1);
        assertThat(dev.mappingCount()).isEqualTo(2);
        a.internals().checkInvariants();
        a.emptyCache();
        assertThat(a.reservedBytes()).isZero();
        assertThat(dev.reservationCount()).isZero();
        assertThat(dev.physicalHandleCount()).isZero();
        a.internals().checkInvariants();
    }

    @Test
    void eventFailureDuringFreeLeavesNoOrphanBlock() {
        SimulatedDevice dev =
                SimulatedDevice.builder().capacity(8L << 30).holdEvents(true).build();
        CachingAllocator a = new CachingAllocator(dev);
        long s1 = dev.createStream();
        long s2 = dev.createStream();
        long p = a.malloc(MiB);
        a.recordStream(p, s1);
        dev.failNth(DeviceOp.RECORD_EVENT, 1, DeviceError.CUDA_ERROR_INVALID_HANDLE);
        assertThatThrownBy(() -> a.free(p)).isInstanceOf(DeviceException.class);
        assertThat(a.internals().pendingFreeBlocks()).isZero(); // no event stands: freed at once
        assertThat(a.stats().toPyTorchMap().get("active_bytes.all.current")).isZero();
        a.internals().checkInvariants();
        long q = a.malloc(MiB);
        a.recordStream(q, s1);
        a.recordStream(q, s2);
        dev.failNth(DeviceOp.RECORD_EVENT, 2, DeviceError.CUDA_ERROR_INVALID_HANDLE);
        assertThatThrownBy(() -> a.free(q)).isInstanceOf(DeviceException.class);
        assertThat(a.internals().pendingFreeBlocks()).isEqualTo(1); // waits on the s1 event that was recorded
        a.internals().checkInvariants();
        a.emptyCache();
        assertThat(a.internals().pendingFreeBlocks()).isZero();
        a.internals().checkInvariants();
    }

    @Test
    void mallocOomIsRetriedAfterReleasingTheCache() {
        SimulatedDevice dev = device();
        CachingAllocator a = new CachingAllocator(dev);
        a.free(a.malloc(30 * MiB));
        dev.failNth(DeviceOp.MALLOC, 1, DeviceError.CUDA_ERROR_OUT_OF_MEMORY);
        a.malloc(40 * MiB);
        Map<String, Long> s = a.stats().toPyTorchMap();
        assertThat(s.get("num_alloc_retries")).isEqualTo(1);
        assertThat(s.get("num_device_free")).isEqualTo(1);
        assertThat(s.get("segment.all.current")).isEqualTo(1);
        a.internals().checkInvariants();
    }

    @Test
    void failingFreeDuringEmptyCacheKeepsTheSegmentCachedButCountedAndTraced() {
        SimulatedDevice dev = device();
        CachingAllocator a = new CachingAllocator(dev);
        a.recordHistory(HistoryOptions.all());
        long p = a.malloc(30 * MiB);
        a.free(p);
        dev.failNth(DeviceOp.FREE, 1, DeviceError.CUDA_ERROR_INVALID_VALUE);
        assertThatThrownBy(a::emptyCache).isInstanceOf(DeviceException.class);
        // PyTorch's release_block counts num_device_free and records segment_free before cudaFree fails
        assertThat(a.reservedBytes()).isEqualTo(30 * MiB);
        assertThat(a.stats().toPyTorchMap().get("num_device_free")).isEqualTo(1);
        assertThat(a.stats().toPyTorchMap().get("segment.all.current")).isEqualTo(1);
        List<TraceEntry> t = a.snapshot().deviceTraces().getFirst();
        assertThat(t.getLast().action()).isEqualTo(TraceAction.SEGMENT_FREE);
        assertThat(t.getLast().addr()).isEqualTo(p);
        a.internals().checkInvariants();
        a.emptyCache();
        assertThat(a.reservedBytes()).isZero();
        assertThat(a.stats().toPyTorchMap().get("num_device_free")).isEqualTo(2);
        a.internals().checkInvariants();
    }

    @Test
    void reservationFailureChangesNothing() {
        SimulatedDevice dev = device();
        CachingAllocator a = new CachingAllocator(dev, expandable());
        dev.failNth(DeviceOp.RESERVE_ADDRESS, 1, DeviceError.CUDA_ERROR_OUT_OF_MEMORY);
        assertThatThrownBy(() -> a.malloc(MiB)).isInstanceOf(DeviceException.class);
        assertThat(dev.reservationCount()).isZero();
        a.internals().checkInvariants();
        a.malloc(MiB);
        a.internals().checkInvariants();
    }
}
