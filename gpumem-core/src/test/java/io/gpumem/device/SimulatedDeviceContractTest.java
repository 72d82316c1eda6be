package io.gpumem.device;

import static io.gpumem.testing.TestSizes.MiB;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.EnumMap;
import java.util.Map;
import org.assertj.core.api.ThrowableAssert.ThrowingCallable;
import org.junit.jupiter.api.Test;

/**
 * The parts of the simulated device's contract that the allocators' tests pass through without looking: each driver
 * call counted once under its own op, an injected fault failing the call it names and leaving the state as it was,
 * the argument checks of the virtual-memory and copy calls at their exact boundaries, the streams' and events'
 * completion rules, and a copy's independence. (Found unguarded by PIT over {@code io.gpumem.device}.)
 */
class SimulatedDeviceContractTest {

    private static final long G = 2 * MiB;

    private static SimulatedDevice device() {
        return SimulatedDevice.builder().capacity(64 * MiB).granularity(G).build();
    }

    private static Map<DeviceOp, Long> counts(SimulatedDevice d) {
        Map<DeviceOp, Long> m = new EnumMap<>(DeviceOp.class);
        for (DeviceOp op : DeviceOp.values()) {
            m.put(op, d.callCount(op));
        }
        return m;
    }

    /** Runs {@code call} and checks that it counted one call of {@code op} and nothing else. */
    private static void countsOnce(SimulatedDevice d, DeviceOp op, Runnable call) {
        Map<DeviceOp, Long> before = counts(d);
        call.run();
        Map<DeviceOp, Long> after = counts(d);
        for (DeviceOp o : DeviceOp.values()) {
            assertThat(after.get(o) - before.get(o))
                    .as("%s counted by the %s call", o, op)
                    .isEqualTo(o == op ? 1 : 0);
        }
    }

    @Test
    void everyDriverCallIsCountedOnceUnderItsOwnOp() {
        SimulatedDevice d = device();
        long[] v = new long[8];
        countsOnce(d, DeviceOp.MEM_GET_INFO, d::freeMemory);
        countsOnce(d, DeviceOp.MALLOC, () -> v[0] = d.malloc(MiB));
        countsOnce(d, DeviceOp.FREE, () -> d.free(v[0]));
        countsOnce(d, DeviceOp.RESERVE_ADDRESS, () -> v[1] = d.reserveAddressRange(4 * G));
        countsOnce(d, DeviceOp.CREATE_PHYSICAL, () -> v[2] = d.createPhysical(G));
        countsOnce(d, DeviceOp.MAP, () -> d.map(v[1], G, v[2]));
        countsOnce(d, DeviceOp.SET_ACCESS, () -> d.setAccess(v[1], G));
        countsOnce(d, DeviceOp.COPY, () -> d.copyDeviceToDevice(v[1], v[1] + 1, 16));
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment host = arena.allocate(16);
            countsOnce(d, DeviceOp.COPY, () -> d.copyToDevice(v[1], host, 16));
            countsOnce(d, DeviceOp.COPY, () -> d.copyToHost(host, v[1], 16));
        }
        countsOnce(d, DeviceOp.UNMAP, () -> d.unmap(v[1], G));
        countsOnce(d, DeviceOp.RELEASE_PHYSICAL, () -> d.releasePhysical(v[2]));
        countsOnce(d, DeviceOp.FREE_ADDRESS, () -> d.freeAddressRange(v[1], 4 * G));
        countsOnce(d, DeviceOp.CREATE_STREAM, () -> v[3] = d.createStream());
        countsOnce(d, DeviceOp.CREATE_EVENT, () -> v[4] = d.createEvent());
        countsOnce(d, DeviceOp.RECORD_EVENT, () -> d.recordEvent(v[4], v[3]));
        countsOnce(d, DeviceOp.QUERY_EVENT, () -> d.queryEvent(v[4]));
        countsOnce(d, DeviceOp.SYNCHRONIZE_EVENT, () -> d.synchronizeEvent(v[4]));
        countsOnce(d, DeviceOp.DESTROY_EVENT, () -> d.destroyEvent(v[4]));
        countsOnce(d, DeviceOp.SYNCHRONIZE_STREAM, () -> d.synchronizeStream(v[3]));
        countsOnce(d, DeviceOp.DESTROY_STREAM, () -> d.destroyStream(v[3]));
        countsOnce(d, DeviceOp.SYNCHRONIZE_DEVICE, d::synchronizeDevice);
        for (DeviceOp op : DeviceOp.values()) {
            assertThat(d.callCount(op)).as("%s was called", op).isPositive();
        }
        // a refused call is a call too: the driver was asked
        countsOnce(
                d,
                DeviceOp.DESTROY_STREAM,
                () -> assertThatThrownBy(() -> d.destroyStream(v[3])).isInstanceOf(DeviceException.class));
    }

    /** Checks that {@code call} fails with the injected error of {@code op}. */
    private static void failsAsInjected(SimulatedDevice d, DeviceOp op, ThrowingCallable call) {
        d.failNth(op, 1, DeviceError.CUDA_ERROR_UNKNOWN);
        assertThatThrownBy(call).as("%s with a fault injected", op).isInstanceOfSatisfying(DeviceException.class, e -> {
            assertThat(e.op()).isEqualTo(op);
            assertThat(e.error()).isEqualTo(DeviceError.CUDA_ERROR_UNKNOWN);
        });
    }

    @Test
    void anInjectedFaultFailsTheCallItNamesAndLeavesTheStateAsItWas() throws Throwable {
        SimulatedDevice d = device();
        failsAsInjected(d, DeviceOp.CREATE_STREAM, d::createStream);
        long stream = d.createStream();
        failsAsInjected(d, DeviceOp.CREATE_EVENT, d::createEvent);
        long event = d.createEvent();
        assertThat(event).as("the failed create made no event").isEqualTo(1);
        failsAsInjected(d, DeviceOp.RECORD_EVENT, () -> d.recordEvent(event, stream));
        d.recordEvent(event, stream);

        long va = d.reserveAddressRange(2 * G);
        long h = d.createPhysical(G);
        failsAsInjected(d, DeviceOp.MAP, () -> d.map(va, G, h));
        d.map(va, G, h);
        failsAsInjected(d, DeviceOp.SET_ACCESS, () -> d.setAccess(va, G));
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment host = arena.allocate(8);
            assertThatThrownBy(() -> d.copyToDevice(va, host, 8))
                    .as("the failed setAccess left the mapping inaccessible")
                    .hasMessageContaining("access was never set");
            d.setAccess(va, G);
            failsAsInjected(d, DeviceOp.COPY, () -> d.copyToDevice(va, host, 8));
            failsAsInjected(d, DeviceOp.COPY, () -> d.copyToHost(host, va, 8));
            failsAsInjected(d, DeviceOp.COPY, () -> d.copyDeviceToDevice(va, va + 8, 8));
            d.copyToDevice(va, host, 8);
        }
        failsAsInjected(d, DeviceOp.UNMAP, () -> d.unmap(va, G));
        assertThat(d.mappingCount()).isEqualTo(1);
        d.unmap(va, G);
        failsAsInjected(d, DeviceOp.RELEASE_PHYSICAL, () -> d.releasePhysical(h));
        assertThat(d.physicalHandleCount()).isEqualTo(1);
        assertThat(d.consumedBytes()).isEqualTo(G);
        d.releasePhysical(h);
        assertThat(d.consumedBytes()).isZero();
        failsAsInjected(d, DeviceOp.FREE_ADDRESS, () -> d.freeAddressRange(va, 2 * G));
        assertThat(d.reservationCount()).isEqualTo(1);
        d.freeAddressRange(va, 2 * G);
        assertThat(d.reservationCount()).isZero();
        // the freed range is reused by the next reservation of its size: it went back when the free succeeded
        assertThat(d.reserveAddressRange(2 * G)).isEqualTo(va);
    }

    @Test
    void aDeviceWithoutVirtualMemoryRefusesPhysicalHandlesAndAnUnknownEventIsNotAnInjectedFault() {
        SimulatedDevice plain = SimulatedDevice.builder()
                .capacity(64 * MiB)
                .virtualMemory(false)
                .build();
        assertThatThrownBy(() -> plain.createPhysical(G))
                .isInstanceOfSatisfying(
                        DeviceException.class,
                        e -> assertThat(e.error()).isEqualTo(DeviceError.CUDA_ERROR_NOT_SUPPORTED));
        assertThat(plain.consumedBytes()).isZero();
        plain.failNth(DeviceOp.RECORD_EVENT, 1, DeviceError.CUDA_ERROR_UNKNOWN);
        assertThatThrownBy(() -> plain.recordEvent(99, Device.DEFAULT_STREAM))
                .as("the handle is checked before the fault strikes")
                .isInstanceOfSatisfying(
                        DeviceException.class,
                        e -> assertThat(e.error()).isEqualTo(DeviceError.CUDA_ERROR_INVALID_HANDLE));
    }

    @Test
    void virtualMemoryCallsTakeOnlyGranularAddressesAndSizes() {
        SimulatedDevice d = device();
        long va = d.reserveAddressRange(4 * G);
        long h = d.createPhysical(G);
        long h2 = d.createPhysical(2 * G);
        assertThatThrownBy(() -> d.map(va + G / 2, G, h)).hasMessageContaining("address");
        assertThatThrownBy(() -> d.map(va, 0, h)).hasMessageContaining("size 0");
        assertThatThrownBy(() -> d.map(va, G / 2, h)).hasMessageContaining("size");
        assertThatThrownBy(() -> d.createPhysical(G + 512)).hasMessageContaining("size");
        d.map(va, G, h);
        d.map(va + G, 2 * G, h2);
        assertThatThrownBy(() -> d.setAccess(va + 512, G)).hasMessageContaining("address");
        assertThatThrownBy(() -> d.setAccess(va, 2 * G)).hasMessageContaining("does not end on a mapping boundary");
        assertThatThrownBy(() -> d.setAccess(va + G, G)).hasMessageContaining("does not end on a mapping boundary");
        assertThatThrownBy(() -> d.setAccess(va, G + 512)).hasMessageContaining("size");
        d.setAccess(va, 3 * G); // two whole mappings at once
        assertThatThrownBy(() -> d.unmap(va, G / 2)).hasMessageContaining("size");
        d.unmap(va, 3 * G);
        assertThat(d.mappingCount()).isZero();
    }

    @Test
    void copiesReachExactlyToTheEndOfWhatIsAllocatedAndNoFurther() {
        SimulatedDevice d = SimulatedDevice.builder()
                .capacity(64 * MiB)
                .granularity(G)
                .backed(true)
                .build();
        long a = d.malloc(G);
        long b = d.malloc(G);
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment host = arena.allocate(64);
            MemorySegment small = arena.allocate(63);
            // b is the last allocation: nothing follows it
            d.copyToDevice(b + G - 64, host, 64); // its last 64 bytes
            assertThatThrownBy(() -> d.copyToDevice(b + G - 63, host, 64)).hasMessageContaining("not allocated");
            d.copyToHost(host, b + G - 64, 64);
            assertThatThrownBy(() -> d.copyToHost(host, b + G - 63, 64)).hasMessageContaining("not allocated");
            d.copyToDevice(a + G - 32, host, 64); // across two adjacent allocations: both are allocated
            assertThatThrownBy(() -> d.copyToHost(small, a, 64))
                    .hasMessageContaining("host buffer of 63 bytes, copy of 64");
            d.copyToHost(small, a, 63); // a host buffer of exactly the copy's size
            assertThatThrownBy(() -> d.copyToDevice(a, host, -1)).hasMessageContaining("copy of -1");
            // device to device: both ends are checked, before anything moves
            assertThatThrownBy(() -> d.copyDeviceToDevice(b + G - 63, a, 64)).hasMessageContaining("not allocated");
            assertThatThrownBy(() -> d.copyDeviceToDevice(a, b + G - 63, 64)).hasMessageContaining("not allocated");
            d.copyDeviceToDevice(a, b + G - 64, 64);
            d.copyDeviceToDevice(a, a + 2 * G, 0); // nothing to move, nothing checked
        }
        // a device without bytes checks a device-to-device copy all the same
        SimulatedDevice unbacked = device();
        long u = unbacked.malloc(G);
        assertThatThrownBy(() -> unbacked.copyDeviceToDevice(u, u + G - 63, 64)).hasMessageContaining("not allocated");
        assertThatThrownBy(() -> unbacked.copyDeviceToDevice(u + G - 63, u, 64)).hasMessageContaining("not allocated");
        unbacked.copyDeviceToDevice(u, u + G - 64, 64);
        d.free(b);
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment host = arena.allocate(64);
            assertThatThrownBy(() -> d.copyToDevice(b, host, 64)).hasMessageContaining("not allocated");
        }
    }

    @Test
    void memoryHeldOutsideCanChangeWithinTheCapacityAndLimitsWhatIsGranted() {
        SimulatedDevice d = device();
        assertThat(d.heldOutside()).isZero();
        d.setHeldOutside(64 * MiB); // all of it
        assertThat(d.freeMemory()).isZero();
        assertThat(d.malloc(G)).isZero();
        assertThatThrownBy(() -> d.setHeldOutside(64 * MiB + 1)).isInstanceOf(IllegalArgumentException.class);
        assertThatThrownBy(() -> d.setHeldOutside(-1)).isInstanceOf(IllegalArgumentException.class);
        d.setHeldOutside(60 * MiB);
        assertThat(d.heldOutside()).isEqualTo(60 * MiB);
        assertThat(d.freeMemory()).isEqualTo(4 * MiB);
        assertThat(d.malloc(4 * MiB)).isNotZero();
        assertThat(d.malloc(G)).isZero();
        assertThat(d.refusedForMemory()).isEqualTo(2);
        // granted with 64 MiB in use (60 outside + 4); each refusal asked for 66 MiB in all (held outside, in use and
        // the 2 MiB asked): every capacity in [64, 66) MiB decides these calls alike
        assertThat(d.sameOutcomesFrom()).isEqualTo(64 * MiB);
        assertThat(d.sameOutcomesBelow()).isEqualTo(66 * MiB);
    }

    @Test
    void eventsCompleteInStreamOrderAndOnlyAsFarAsAskedWhenHeld() {
        SimulatedDevice d =
                SimulatedDevice.builder().capacity(64 * MiB).holdEvents(true).build();
        long s = d.createStream();
        long e1 = d.createEvent();
        long e2 = d.createEvent();
        long e3 = d.createEvent();
        assertThat(new long[] {e1, e2, e3}).doesNotHaveDuplicates();
        assertThat(d.queryEvent(e1)).as("never recorded: complete").isTrue();
        assertThat(d.completeNextEvent(s)).as("nothing pending").isFalse();
        d.recordEvent(e1, s);
        d.recordEvent(e2, s);
        d.recordEvent(e3, s);
        d.synchronizeEvent(e2); // completes e1 and e2, not e3
        assertThat(d.queryEvent(e1)).isTrue();
        assertThat(d.queryEvent(e2)).isTrue();
        assertThat(d.queryEvent(e3)).isFalse();
        assertThat(d.pendingEventCount()).isEqualTo(1);
        d.synchronizeEvent(e1); // an event already complete moves nothing back
        assertThat(d.queryEvent(e2)).isTrue();
        assertThat(d.completeNextEvent(s)).isTrue();
        assertThat(d.queryEvent(e3)).isTrue();
        assertThat(d.completeNextEvent(s)).as("all done").isFalse();
        assertThat(d.completeNextEvent(12345)).as("a stream nobody used").isFalse();
        d.destroyEvent(e1);
        assertThatThrownBy(() -> d.queryEvent(e1)).isInstanceOf(DeviceException.class);
        d.destroyStream(s);
        assertThatThrownBy(() -> d.destroyStream(s)).isInstanceOf(DeviceException.class);
        assertThatThrownBy(() -> d.destroyStream(Device.DEFAULT_STREAM))
                .as("the default stream always exists")
                .isInstanceOf(DeviceException.class);
    }

    @Test
    void aCopyGoesOnAloneFromTheSameStateAndNeedsRoomForWhatIsInUse() {
        SimulatedDevice d = SimulatedDevice.builder()
                .capacity(64 * MiB)
                .heldOutside(4 * MiB)
                .holdEvents(true)
                .build();
        long a = d.malloc(10 * MiB);
        long va = d.reserveAddressRange(4 * G);
        long h = d.createPhysical(G);
        d.map(va, G, h);
        long s = d.createStream();
        long e = d.createEvent();
        d.recordEvent(e, s);
        assertThatThrownBy(() -> d.copyWithCapacity(16 * MiB - 1)).hasMessageContaining("below the 16777216 bytes");
        SimulatedDevice c = d.copyWithCapacity(16 * MiB); // exactly what is in use, outside included
        assertThat(c.freeMemory()).isZero();
        assertThat(c.heldOutside()).isEqualTo(4 * MiB);
        assertThat(c.mallocCount()).isEqualTo(1);
        assertThat(c.mappingCount()).isEqualTo(1);
        assertThat(c.reservationCount()).isEqualTo(1);
        assertThat(c.physicalHandleCount()).isEqualTo(1);
        assertThat(c.callCount(DeviceOp.MALLOC)).isEqualTo(1);
        assertThat(c.queryEvent(e)).as("the copy's event is still pending").isFalse();
        // the copy goes on alone: what either does is not seen by the other
        c.free(a);
        c.unmap(va, G);
        assertThat(c.completeNextEvent(s)).isTrue();
        assertThat(d.mallocCount()).isEqualTo(1);
        assertThat(d.mappingCount()).isEqualTo(1);
        assertThat(d.queryEvent(e)).isFalse();
        assertThat(d.callCount(DeviceOp.FREE)).isZero();
        // and makes the same next choices as the original would
        long again = c.reserveAddressRange(2 * G);
        assertThat(d.reserveAddressRange(2 * G)).isEqualTo(again);
        assertThat(c.createStream()).isEqualTo(d.createStream());
        assertThat(c.createEvent()).isEqualTo(d.createEvent());
    }
}
