package io.gpumem.device;

import static io.gpumem.testing.TestSizes.GiB;
import static io.gpumem.testing.TestSizes.MiB;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import org.junit.jupiter.api.Test;

class SimulatedDeviceTest {

    /**
     * Plays a seeded script of mallocs, frees and physical handles on a device of {@code capacity} bytes with 3 MiB
     * held outside; returns each allocation call's outcome (granted or refused), in order. The script's frees pick
     * among the granted calls only, so it depends on nothing but the outcomes.
     */
    private static List<Boolean> outcomes(long seed, long capacity, long[] range) {
        Random rnd = new Random(seed);
        SimulatedDevice d = SimulatedDevice.builder()
                .capacity(capacity)
                .heldOutside(3 * MiB)
                .virtualMemory(true)
                .build();
        List<Boolean> out = new ArrayList<>();
        List<Long> mallocs = new ArrayList<>();
        List<Long> handles = new ArrayList<>();
        for (int i = 0; i < 300; i++) {
            int r = rnd.nextInt(10);
            if (r < 4) {
                long a = d.malloc(1 + rnd.nextInt(9 * (int) MiB));
                out.add(a != Device.NULL);
                if (a != Device.NULL) {
                    mallocs.add(a);
                }
            } else if (r < 6) {
                long h = d.createPhysical((1L + rnd.nextInt(4)) * 2 * MiB);
                out.add(h != Device.NULL);
                if (h != Device.NULL) {
                    handles.add(h);
                }
            } else if (r < 9 && !mallocs.isEmpty()) {
                d.free(mallocs.remove(rnd.nextInt(mallocs.size())));
            } else if (!handles.isEmpty()) {
                d.releasePhysical(handles.remove(rnd.nextInt(handles.size())));
            }
            if (i == 150) {
                d = d.copyWithCapacity(capacity); // the range carries over to a copy
            }
        }
        range[0] = d.sameOutcomesFrom();
        range[1] = d.sameOutcomesBelow();
        return out;
    }

    @Test
    void everyCapacityInTheSameOutcomesRangeGrantsAndRefusesTheSameCalls() {
        long seed = Long.getLong("gpumem.seed", System.nanoTime());
        System.out.println("SimulatedDeviceTest seed " + seed + " (-Dgpumem.seed replays it)");
        Random rnd = new Random(seed);
        int refusing = 0;
        for (int round = 0; round < 40; round++) {
            long scriptSeed = rnd.nextLong();
            long capacity = (20 + rnd.nextInt(60)) * MiB + rnd.nextInt((int) MiB);
            long[] range = new long[2];
            List<Boolean> recorded = outcomes(scriptSeed, capacity, range);
            long from = range[0];
            long below = range[1];
            String what = "seed " + seed + " round " + round + " capacity " + capacity;
            assertThat(from).as(what).isLessThanOrEqualTo(capacity);
            assertThat(below).as(what).isGreaterThan(capacity);
            long[] ignored = new long[2];
            assertThat(outcomes(scriptSeed, from, ignored))
                    .as(what + " at the range's start")
                    .isEqualTo(recorded);
            long between = from + (long) (rnd.nextDouble() * (Math.min(below, 200 * MiB) - from));
            assertThat(outcomes(scriptSeed, between, ignored))
                    .as(what + " inside")
                    .isEqualTo(recorded);
            // just outside the range some call goes the other way: the bounds are tight
            if (from > 3 * MiB) {
                assertThat(outcomes(scriptSeed, from - 1, ignored))
                        .as(what + " below")
                        .isNotEqualTo(recorded);
            }
            if (below != Long.MAX_VALUE) {
                refusing++;
                assertThat(outcomes(scriptSeed, below - 1, ignored))
                        .as(what + " at the top")
                        .isEqualTo(recorded);
                assertThat(outcomes(scriptSeed, below, ignored))
                        .as(what + " above")
                        .isNotEqualTo(recorded);
            }
        }
        assertThat(refusing).as("rounds that refused a call").isPositive();
    }

    /**
     * The rises a device reports are those of {@link SimulatedDevice#sameOutcomesFrom()}, as granted calls raise it
     * (consumed bytes with those held outside): not a refusal, not a call below the peak, and not on a copy.
     */
    @Test
    void reportsEachRiseOfThePeakDemandAGrantedCallMakes() {
        SimulatedDevice d = SimulatedDevice.builder()
                .capacity(20 * MiB)
                .heldOutside(2 * MiB)
                .build();
        List<Long> rises = new ArrayList<>();
        d.reportPeakDemandRises(rises::add);
        long a = d.malloc(4 * MiB); // 2 + 4
        long b = d.malloc(3 * MiB); // rounded to 4: 2 + 8
        d.free(a);
        long c = d.malloc(2 * MiB); // 2 + 6: below the peak
        assertThat(d.malloc(16 * MiB)).as("refused").isEqualTo(Device.NULL);
        long e = d.malloc(4 * MiB); // 2 + 10: a new peak
        assertThat(rises).containsExactly(6 * MiB, 10 * MiB, 12 * MiB);
        assertThat(d.sameOutcomesFrom()).isEqualTo(12 * MiB);

        SimulatedDevice copy = d.copyWithCapacity(40 * MiB);
        copy.malloc(16 * MiB);
        assertThat(rises).as("the copy tells nobody").hasSize(3);
        d.reportPeakDemandRises(null);
        d.free(b);
        d.free(c);
        d.free(e);
        d.malloc(12 * MiB);
        assertThat(rises).as("nobody told after null").hasSize(3);
    }

    @Test
    void mallocConsumesCapacityAndOutOfMemoryIsANullResult() {
        SimulatedDevice d = SimulatedDevice.builder()
                .capacity(10 * MiB)
                .heldOutside(2 * MiB)
                .build();
        assertThat(d.freeMemory()).isEqualTo(8 * MiB);
        long a = d.malloc(6 * MiB);
        assertThat(a).isNotZero();
        assertThat(d.freeMemory()).isEqualTo(2 * MiB);
        assertThat(d.malloc(4 * MiB)).isEqualTo(Device.NULL);
        assertThat(d.callCount(DeviceOp.MALLOC)).isEqualTo(2);
        d.free(a);
        assertThat(d.freeMemory()).isEqualTo(8 * MiB);
    }

    /**
     * A malloc whose size, rounded up to the granularity, would pass 2^63 is refused for want of memory, as any other
     * malloc larger than the room left: the rounding must not wrap to a negative size that passes for room.
     */
    @Test
    void aMallocWhoseRoundedSizePasses2To63IsRefused() {
        SimulatedDevice d =
                SimulatedDevice.builder().capacity(GiB).heldOutside(2 * MiB).build();
        assertThat(d.malloc(Long.MAX_VALUE - 4096)).isEqualTo(Device.NULL);
        assertThat(d.malloc(Long.MAX_VALUE)).isEqualTo(Device.NULL);
        assertThat(d.consumedBytes()).isZero();
        assertThat(d.freeMemory()).isEqualTo(GiB - 2 * MiB);
        assertThat(d.sameOutcomesBelow()).as("no capacity grants them").isEqualTo(Long.MAX_VALUE);
    }

    @Test
    void sizesAreConsumedInWholeGranules() {
        SimulatedDevice d = SimulatedDevice.builder().capacity(GiB).build();
        d.malloc(1);
        assertThat(d.consumedBytes()).isEqualTo(2 * MiB);
    }

    @Test
    void newAllocationReusesTheMostRecentlyFreedRangeOfTheSameSize() {
        SimulatedDevice d = SimulatedDevice.withCapacity(GiB);
        long a = d.malloc(20 * MiB);
        long b = d.malloc(20 * MiB);
        long c = d.malloc(2 * MiB);
        assertThat(b).isEqualTo(a + 20 * MiB);
        d.free(a);
        d.free(b);
        assertThat(d.malloc(2 * MiB)).isNotEqualTo(a).isNotEqualTo(b); // other size: fresh space
        assertThat(d.malloc(20 * MiB)).isEqualTo(b); // most recently freed first
        assertThat(d.malloc(20 * MiB)).isEqualTo(a);
        assertThat(c % (2 * MiB)).isZero();
    }

    @Test
    void addressesAreDeterministicAcrossInstances() {
        long[] first = sequence(SimulatedDevice.withCapacity(GiB));
        long[] second = sequence(SimulatedDevice.withCapacity(GiB));
        assertThat(first).containsExactly(second);
    }

    private static long[] sequence(SimulatedDevice d) {
        long a = d.malloc(4 * MiB);
        long b = d.malloc(10 * MiB);
        d.free(a);
        long c = d.malloc(4 * MiB);
        long r = d.reserveAddressRange(40 * MiB);
        return new long[] {a, b, c, r};
    }

    @Test
    void doubleFreeAndForeignPointerFailLoudlyWithoutChangingState() {
        SimulatedDevice d = SimulatedDevice.withCapacity(GiB);
        long a = d.malloc(MiB);
        d.free(a);
        long free = d.freeMemory();
        assertThatThrownBy(() -> d.free(a))
                .isInstanceOf(DeviceException.class)
                .hasMessageContaining("CUDA_ERROR_INVALID_VALUE")
                .hasMessageContaining(Long.toHexString(a));
        assertThatThrownBy(() -> d.free(12345)).isInstanceOf(DeviceException.class);
        assertThat(d.freeMemory()).isEqualTo(free);
        assertThatThrownBy(() -> d.malloc(0)).isInstanceOf(DeviceException.class);
    }

    @Test
    void virtualMemoryLifecycleFollowsTheDriverRules() {
        SimulatedDevice d = SimulatedDevice.builder().capacity(100 * MiB).build();
        long g = d.allocationGranularity();
        long va = d.reserveAddressRange(10 * g);
        long h1 = d.createPhysical(g);
        long h2 = d.createPhysical(g);
        assertThat(d.freeMemory()).isEqualTo(100 * MiB - 2 * g);
        d.map(va, g, h1);
        d.map(va + g, g, h2);
        d.setAccess(va, 2 * g);
        d.releasePhysical(h1);
        d.releasePhysical(h2);
        // released but still mapped: memory stays in use
        assertThat(d.freeMemory()).isEqualTo(100 * MiB - 2 * g);
        assertThatThrownBy(() -> d.unmap(va, g + g / 2)).isInstanceOf(DeviceException.class);
        assertThatThrownBy(() -> d.freeAddressRange(va, 10 * g))
                .isInstanceOf(DeviceException.class)
                .hasMessageContaining("still has a mapping");
        d.unmap(va, 2 * g); // two mappings at once is allowed: whole mappings
        assertThat(d.freeMemory()).isEqualTo(100 * MiB);
        assertThat(d.physicalHandleCount()).isZero();
        d.freeAddressRange(va, 10 * g);
        assertThat(d.reservationCount()).isZero();
    }

    @Test
    void virtualMemoryRejectsMisuse() {
        SimulatedDevice d = SimulatedDevice.withCapacity(GiB);
        long g = d.allocationGranularity();
        assertThatThrownBy(() -> d.reserveAddressRange(g + 1))
                .isInstanceOf(DeviceException.class)
                .hasMessageContaining("granularity");
        long va = d.reserveAddressRange(4 * g);
        long h = d.createPhysical(g);
        assertThatThrownBy(() -> d.map(va, 2 * g, h)).isInstanceOf(DeviceException.class); // wrong size
        assertThatThrownBy(() -> d.map(va + 4 * g, g, h)).isInstanceOf(DeviceException.class); // outside
        d.map(va, g, h);
        assertThatThrownBy(() -> d.map(va, g, h)).isInstanceOf(DeviceException.class); // overlap
        d.releasePhysical(h);
        assertThatThrownBy(() -> d.releasePhysical(h)).isInstanceOf(DeviceException.class); // double release
        assertThatThrownBy(() -> d.unmap(va + g, g)).isInstanceOf(DeviceException.class); // not mapped
        assertThatThrownBy(() -> d.createPhysical(3 * MiB)).isInstanceOf(DeviceException.class);
    }

    @Test
    void createPhysicalReportsOutOfMemoryAsNull() {
        SimulatedDevice d = SimulatedDevice.builder().capacity(4 * MiB).build();
        assertThat(d.createPhysical(2 * MiB)).isNotZero();
        assertThat(d.createPhysical(2 * MiB)).isNotZero();
        assertThat(d.createPhysical(2 * MiB)).isZero();
    }

    @Test
    void deviceWithoutVirtualMemoryRefusesTheFamily() {
        SimulatedDevice d =
                SimulatedDevice.builder().capacity(GiB).virtualMemory(false).build();
        assertThat(d.supportsVirtualMemory()).isFalse();
        assertThatThrownBy(() -> d.reserveAddressRange(2 * MiB))
                .isInstanceOf(DeviceException.class)
                .extracting(e -> ((DeviceException) e).error())
                .isEqualTo(DeviceError.CUDA_ERROR_NOT_SUPPORTED);
    }

    @Test
    void injectedFaultsHitTheNthCall() {
        SimulatedDevice d = SimulatedDevice.withCapacity(GiB);
        d.failNth(DeviceOp.MALLOC, 2, DeviceError.CUDA_ERROR_OUT_OF_MEMORY);
        assertThat(d.malloc(MiB)).isNotZero();
        assertThat(d.malloc(MiB)).isZero();
        assertThat(d.malloc(MiB)).isNotZero();
        long va = d.reserveAddressRange(4 * MiB);
        long h = d.createPhysical(2 * MiB);
        d.failNth(DeviceOp.MAP, 1, DeviceError.CUDA_ERROR_UNKNOWN);
        assertThatThrownBy(() -> d.map(va, 2 * MiB, h))
                .isInstanceOf(DeviceException.class)
                .hasMessageContaining("CUDA_ERROR_UNKNOWN");
        assertThat(d.mappingCount()).isZero();
        d.map(va, 2 * MiB, h);
        assertThat(d.mappingCount()).isEqualTo(1);
        assertThat(d.callCount(DeviceOp.MAP)).isEqualTo(2);
    }

    @Test
    void heldEventsCompleteOnlyWhenReleasedInStreamOrder() {
        SimulatedDevice d =
                SimulatedDevice.builder().capacity(GiB).holdEvents(true).build();
        long s = d.createStream();
        long e1 = d.createEvent();
        long e2 = d.createEvent();
        d.recordEvent(e1, s);
        d.recordEvent(e2, s);
        assertThat(d.queryEvent(e1)).isFalse();
        assertThat(d.pendingEventCount()).isEqualTo(2);
        assertThat(d.completeNextEvent(s)).isTrue();
        assertThat(d.queryEvent(e1)).isTrue();
        assertThat(d.queryEvent(e2)).isFalse();
        d.synchronizeEvent(e2);
        assertThat(d.queryEvent(e2)).isTrue();
        d.recordEvent(e1, s);
        assertThat(d.queryEvent(e1)).isFalse();
        d.synchronizeDevice();
        assertThat(d.queryEvent(e1)).isTrue();
        d.holdEvents(false);
        d.recordEvent(e2, s);
        assertThat(d.queryEvent(e2)).isTrue();
    }

    @Test
    void backedMemoryMovesBytesAcrossMappedPages() {
        SimulatedDevice d = SimulatedDevice.builder().capacity(GiB).backed(true).build();
        long g = d.allocationGranularity();
        long va = d.reserveAddressRange(2 * g);
        long h1 = d.createPhysical(g);
        long h2 = d.createPhysical(g);
        d.map(va, g, h1);
        d.map(va + g, g, h2);
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment src = arena.allocate(1000);
            for (int i = 0; i < 250; i++) {
                src.setAtIndex(ValueLayout.JAVA_INT, i, i * 7);
            }
            long at = va + g - 400; // straddles the page boundary
            assertThatThrownBy(() -> d.copyToDevice(at, src, 1000))
                    .isInstanceOf(DeviceException.class)
                    .hasMessageContaining("access");
            d.setAccess(va, 2 * g);
            d.copyToDevice(at, src, 1000);
            long m = d.malloc(4096);
            d.copyDeviceToDevice(m, at, 1000);
            MemorySegment dst = arena.allocate(1000);
            d.copyToHost(dst, m, 1000);
            assertThat(dst.mismatch(src)).isEqualTo(-1);
            MemorySegment zeros = arena.allocate(16);
            zeros.fill((byte) 1);
            d.copyToHost(zeros, m + 2000, 16);
            assertThat(zeros.toArray(ValueLayout.JAVA_BYTE)).containsOnly(0);
            assertThatThrownBy(() -> d.copyToHost(dst, m + 4000, 1000))
                    .isInstanceOf(DeviceException.class)
                    .hasMessageContaining("not allocated");
        }
    }

    @Test
    void streamsNamedByATraceWorkWithoutBeingCreated() {
        SimulatedDevice d =
                SimulatedDevice.builder().capacity(GiB).holdEvents(true).build();
        long traceStream = 0x55d1_2345_6780L;
        long e = d.createEvent();
        d.recordEvent(e, traceStream);
        assertThat(d.queryEvent(e)).isFalse();
        d.synchronizeStream(traceStream);
        assertThat(d.queryEvent(e)).isTrue();
        d.synchronizeStream(0x1234L); // never seen: nothing to wait for
    }

    @Test
    void builderRejectsImpossibleOptions() {
        assertThatThrownBy(() -> SimulatedDevice.builder().capacity(0)).isInstanceOf(IllegalArgumentException.class);
        assertThatThrownBy(() -> SimulatedDevice.builder().granularity(3 * MiB))
                .isInstanceOf(IllegalArgumentException.class);
        assertThatThrownBy(() -> SimulatedDevice.builder()
                        .capacity(MiB)
                        .heldOutside(2 * MiB)
                        .build())
                .isInstanceOf(IllegalArgumentException.class);
    }
}
