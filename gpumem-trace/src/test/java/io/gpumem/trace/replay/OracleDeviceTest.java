package io.gpumem.trace.replay;

import static org.assertj.core.api.Assertions.assertThat;

import org.junit.jupiter.api.Test;

/**
 * The oracle device hands out the recorded addresses it is offered, and never memory that meets a range it
 * handed out and still holds, whether an allocation or an address reservation: there it gives a synthetic address
 * (far above every real one) and counts it, so a replay that diverged from the recording goes on without two live
 * blocks sharing memory.
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
}
