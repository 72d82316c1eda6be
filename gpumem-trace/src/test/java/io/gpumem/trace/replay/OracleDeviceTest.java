package io.gpumem.trace.replay;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.gpumem.device.DeviceException;
import io.gpumem.device.DeviceOp;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * The oracle device hands out the recorded addresses it is offered, and never memory that meets a range it
 * handed out and still holds, whether an allocation or an address reservation: there it gives a synthetic address
 * (far above every real one) and counts it, so a replay that diverged from the recording goes on without two live
 * blocks sharing memory.
 *
 * <p>PIT showed the synthetic address scheme, the offer queue past its first 16 entries, the removal of a taken
 * map offer and the call counters unpinned: the tests from {@link #syntheticAddressesAreConsecutiveWholePages} on.
 */
class OracleDeviceTest {

    private static final long MIB = 1L << 20;
    private static final long BASE = 0x7f00_0000_0000L;

    @Test
    void anOfferedAddressIsTakenWhenItMeetsNothing() {
        OracleDevice device = new OracleDevice();
        device.offerMalloc(BASE);
        assertThat(device.malloc(2 * MIB)).isEqualTo(BASE);
        device.offerMalloc(BASE + 2 * MIB); // touching the first range is not meeting it
        assertThat(device.malloc(2 * MIB)).isEqualTo(BASE + 2 * MIB);
        device.offerMalloc(BASE - 2 * MIB); // nor is ending where it starts
        assertThat(device.malloc(2 * MIB)).isEqualTo(BASE - 2 * MIB);
        assertThat(device.syntheticAddresses()).isZero();
    }

    @Test
    void anOfferThatMeetsALiveAllocationGetsASyntheticAddress() {
        OracleDevice device = new OracleDevice();
        device.offerMalloc(BASE);
        device.malloc(4 * MIB);
        long[] meeting = {BASE, BASE + 2 * MIB, BASE - 2 * MIB};
        long[] sizes = {2 * MIB, 2 * MIB, 4 * MIB}; // the same start; inside; from below, over the start
        for (int i = 0; i < meeting.length; i++) {
            device.offerMalloc(meeting[i]);
            long got = device.malloc(sizes[i]);
            assertThat(got).as("offer %x", meeting[i]).isNotEqualTo(meeting[i]).isGreaterThanOrEqualTo(1L << 62);
        }
        assertThat(device.syntheticAddresses()).isEqualTo(3);
        // once freed, the range can be handed out again
        device.free(BASE);
        device.offerMalloc(BASE + MIB);
        assertThat(device.malloc(MIB)).isEqualTo(BASE + MIB);
        assertThat(device.syntheticAddresses()).isEqualTo(3);
    }

    @Test
    void allocationsAndReservationsKeepClearOfEachOther() {
        OracleDevice device = new OracleDevice();
        device.offerMap(BASE);
        assertThat(device.reserveAddressRange(64 * MIB)).isEqualTo(BASE);
        device.offerMalloc(BASE + 8 * MIB);
        assertThat(device.malloc(2 * MIB)).as("inside a reservation").isGreaterThanOrEqualTo(1L << 62);

        device.offerMalloc(BASE + 64 * MIB);
        assertThat(device.malloc(2 * MIB)).isEqualTo(BASE + 64 * MIB);
        // a reservation skips the offers that meet an allocation or a reservation, and takes the first that does not
        device.offerMap(BASE + 64 * MIB); // meets the allocation only
        device.offerMap(BASE + 32 * MIB); // meets the reservation only
        device.offerMap(BASE + 66 * MIB);
        assertThat(device.reserveAddressRange(32 * MIB)).isEqualTo(BASE + 66 * MIB);
        device.clearOffers();
        device.offerMap(BASE + 90 * MIB);
        assertThat(device.reserveAddressRange(64 * MIB))
                .as("meets the one below")
                .isGreaterThanOrEqualTo(1L << 62);
        device.clearOffers();
        device.freeAddressRange(BASE + 66 * MIB, 32 * MIB);
        device.offerMap(BASE + 70 * MIB);
        assertThat(device.reserveAddressRange(8 * MIB)).isEqualTo(BASE + 70 * MIB);
    }

    private static final long SYNTHETIC = 1L << 62;

    @Test
    void syntheticAddressesAreConsecutiveWholePages() {
        OracleDevice device = new OracleDevice();
        assertThat(device.malloc(3 * MIB)).isEqualTo(SYNTHETIC);
        assertThat(device.malloc(1)).isEqualTo(SYNTHETIC + 4 * MIB);
        assertThat(device.reserveAddressRange(2 * MIB)).isEqualTo(SYNTHETIC + 6 * MIB);
        assertThat(device.malloc(2 * MIB)).isEqualTo(SYNTHETIC + 8 * MIB);
        assertThat(device.syntheticAddresses()).isEqualTo(4);
    }

    @Test
    void aSyntheticRangeIsHeldLikeAnOfferedOne() {
        OracleDevice device = new OracleDevice();
        long block = device.malloc(4 * MIB);
        long reservation = device.reserveAddressRange(4 * MIB);
        device.offerMalloc(block + 2 * MIB); // inside the synthetic allocation
        assertThat(device.malloc(2 * MIB)).isEqualTo(SYNTHETIC + 8 * MIB);
        device.offerMalloc(reservation); // at the synthetic reservation
        assertThat(device.malloc(2 * MIB)).isEqualTo(SYNTHETIC + 10 * MIB);
        assertThat(device.syntheticAddresses()).isEqualTo(4);
    }

    @Test
    void anAllocationMayTouchAReservationButNotMeetIt() {
        OracleDevice device = new OracleDevice();
        device.offerMap(BASE);
        assertThat(device.reserveAddressRange(8 * MIB)).isEqualTo(BASE);
        device.offerMalloc(BASE - 4 * MIB); // ends 2 MiB inside the reservation
        assertThat(device.malloc(6 * MIB)).isEqualTo(SYNTHETIC);
        device.offerMalloc(BASE - 4 * MIB); // ends where it starts
        assertThat(device.malloc(4 * MIB)).isEqualTo(BASE - 4 * MIB);
        device.offerMap(BASE - 12 * MIB); // a reservation ending at that allocation's start
        assertThat(device.reserveAddressRange(8 * MIB)).isEqualTo(BASE - 12 * MIB);
        device.offerMap(BASE - 3 * MIB); // inside the allocation
        assertThat(device.reserveAddressRange(MIB)).isEqualTo(SYNTHETIC + 6 * MIB);
    }

    @Test
    void clearedOffersAreNotTaken() {
        OracleDevice device = new OracleDevice();
        device.offerMalloc(BASE);
        device.offerMap(BASE + 64 * MIB);
        device.clearOffers();
        assertThat(device.malloc(2 * MIB)).isEqualTo(SYNTHETIC);
        assertThat(device.reserveAddressRange(2 * MIB)).isEqualTo(SYNTHETIC + 2 * MIB);
    }

    @Test
    void aTakenMapOfferLeavesTheQueueAndTheOthersKeepTheirOrder() {
        OracleDevice device = new OracleDevice();
        device.offerMalloc(BASE);
        device.malloc(2 * MIB);
        device.offerMap(BASE); // meets the allocation: stays queued, skipped
        for (int i = 1; i < 16; i++) {
            device.offerMap(BASE + 16L * i * MIB);
        }
        // each reservation takes the first offer that meets nothing, out of the middle of the queue
        for (int i = 1; i < 16; i++) {
            assertThat(device.reserveAddressRange(8 * MIB))
                    .as("reservation " + i)
                    .isEqualTo(BASE + 16L * i * MIB);
        }
        // released, the first reservation's range is free again, but its offer was taken
        device.freeAddressRange(BASE + 16 * MIB, 8 * MIB);
        assertThat(device.reserveAddressRange(8 * MIB)).isEqualTo(SYNTHETIC);
        device.free(BASE);
        assertThat(device.reserveAddressRange(8 * MIB)).as("the skipped offer").isEqualTo(BASE);
    }

    @Test
    void moreThan16OffersAreTakenInOrder() {
        OracleDevice device = new OracleDevice();
        for (int i = 0; i < 40; i++) {
            device.offerMalloc(BASE + 2L * i * MIB);
        }
        for (int i = 0; i < 10; i++) {
            assertThat(device.malloc(2 * MIB)).isEqualTo(BASE + 2L * i * MIB);
        }
        // a queue that was partly taken is compacted, not grown, when it reaches its end
        for (int i = 40; i < 70; i++) {
            device.offerMalloc(BASE + 2L * i * MIB);
        }
        for (int i = 10; i < 70; i++) {
            assertThat(device.malloc(2 * MIB)).as("malloc " + i).isEqualTo(BASE + 2L * i * MIB);
        }
        assertThat(device.syntheticAddresses()).isZero();
        assertThat(device.callCount(DeviceOp.MALLOC)).isEqualTo(70);
    }

    @Test
    void everyDriverCallIsCounted() {
        OracleDevice device = new OracleDevice(64 * MIB);
        assertThat(device.freeMemory()).isEqualTo(64 * MIB);
        assertThatThrownBy(() -> device.malloc(0)).isInstanceOf(DeviceException.class);
        long a = device.malloc(2 * MIB);
        device.free(a);
        long r = device.reserveAddressRange(2 * MIB);
        long h = device.createPhysical(2 * MIB);
        device.map(r, 2 * MIB, h);
        device.setAccess(r, 2 * MIB);
        device.unmap(r, 2 * MIB);
        device.releasePhysical(h);
        device.freeAddressRange(r, 2 * MIB);
        long stream = device.createStream();
        long event = device.createEvent();
        assertThat(List.of(h, stream, event)).containsExactly(1L, 2L, 3L);
        device.recordEvent(event, stream);
        assertThat(device.queryEvent(event)).isTrue();
        device.synchronizeEvent(event);
        device.synchronizeStream(stream);
        device.synchronizeDevice();
        device.destroyEvent(event);
        device.destroyStream(stream);
        for (DeviceOp op : DeviceOp.values()) {
            long expected = op == DeviceOp.MALLOC ? 2 : op == DeviceOp.COPY || op == DeviceOp.MEM_GET_INFO ? 0 : 1;
            assertThat(device.callCount(op)).as(op.name()).isEqualTo(expected);
        }
    }
}
