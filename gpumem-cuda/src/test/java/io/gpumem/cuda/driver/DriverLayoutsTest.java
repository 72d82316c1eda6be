package io.gpumem.cuda.driver;

import static java.lang.foreign.MemoryLayout.PathElement.groupElement;
import static org.assertj.core.api.Assertions.assertThat;

import java.lang.foreign.Arena;
import java.lang.foreign.MemoryLayout.PathElement;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import org.junit.jupiter.api.Test;

/** Pins the driver struct layouts field by field against CUDA 13's cuda.h (x86-64 / aarch64 offsets). */
class DriverLayoutsTest {

    private static long offset(java.lang.foreign.MemoryLayout layout, PathElement... path) {
        return layout.byteOffset(path);
    }

    @Test
    void memLocationIsTwoInts() {
        assertThat(DriverLayouts.MEM_LOCATION.byteSize()).isEqualTo(8);
        assertThat(DriverLayouts.MEM_LOCATION.byteAlignment()).isEqualTo(4);
        assertThat(offset(DriverLayouts.MEM_LOCATION, groupElement("type"))).isZero();
        assertThat(offset(DriverLayouts.MEM_LOCATION, groupElement("id"))).isEqualTo(4);
    }

    @Test
    void memAllocationPropIs32BytesFieldByField() {
        var prop = DriverLayouts.MEM_ALLOCATION_PROP;
        assertThat(prop.byteSize()).isEqualTo(32);
        assertThat(prop.byteAlignment()).isEqualTo(8);
        assertThat(offset(prop, groupElement("type"))).isEqualTo(0);
        assertThat(offset(prop, groupElement("requestedHandleTypes"))).isEqualTo(4);
        assertThat(offset(prop, groupElement("location"))).isEqualTo(8);
        assertThat(offset(prop, groupElement("location"), groupElement("type"))).isEqualTo(8);
        assertThat(offset(prop, groupElement("location"), groupElement("id"))).isEqualTo(12);
        assertThat(offset(prop, groupElement("win32HandleMetaData"))).isEqualTo(16);
        assertThat(offset(prop, groupElement("allocFlags"))).isEqualTo(24);
        assertThat(offset(prop, groupElement("allocFlags"), groupElement("compressionType")))
                .isEqualTo(24);
        assertThat(offset(prop, groupElement("allocFlags"), groupElement("gpuDirectRDMACapable")))
                .isEqualTo(25);
        assertThat(offset(prop, groupElement("allocFlags"), groupElement("usage")))
                .isEqualTo(26);
        assertThat(offset(prop, groupElement("allocFlags"), groupElement("reserved")))
                .isEqualTo(28);
        assertThat(prop.select(groupElement("allocFlags")).byteSize()).isEqualTo(8);
        assertThat(prop.select(groupElement("allocFlags"), groupElement("reserved"))
                        .byteSize())
                .isEqualTo(4);
        assertThat(prop.select(groupElement("win32HandleMetaData")).byteSize()).isEqualTo(8);
    }

    @Test
    void memAccessDescIs12BytesFieldByField() {
        var desc = DriverLayouts.MEM_ACCESS_DESC;
        assertThat(desc.byteSize()).isEqualTo(12);
        assertThat(desc.byteAlignment()).isEqualTo(4);
        assertThat(offset(desc, groupElement("location"))).isEqualTo(0);
        assertThat(offset(desc, groupElement("location"), groupElement("type"))).isEqualTo(0);
        assertThat(offset(desc, groupElement("location"), groupElement("id"))).isEqualTo(4);
        assertThat(offset(desc, groupElement("flags"))).isEqualTo(8);
    }

    @Test
    void pinnedDevicePropWritesTheFieldsCuMemCreateChecks() {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment prop = DriverLayouts.pinnedDeviceProp(arena, 3);
            assertThat(prop.byteSize()).isEqualTo(32);
            assertThat(prop.get(ValueLayout.JAVA_INT, 0)).isEqualTo(DriverLayouts.ALLOCATION_TYPE_PINNED);
            assertThat(prop.get(ValueLayout.JAVA_INT, 4)).isEqualTo(DriverLayouts.HANDLE_TYPE_NONE);
            assertThat(prop.get(ValueLayout.JAVA_INT, 8)).isEqualTo(DriverLayouts.LOCATION_TYPE_DEVICE);
            assertThat(prop.get(ValueLayout.JAVA_INT, 12)).isEqualTo(3);
            assertThat(prop.get(ValueLayout.JAVA_LONG, 16)).isZero();
            assertThat(prop.get(ValueLayout.JAVA_LONG, 24)).isZero();
        }
    }

    @Test
    void readWriteAccessGrantsTheDevice() {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment desc = DriverLayouts.readWriteAccess(arena, 2);
            assertThat(desc.byteSize()).isEqualTo(12);
            assertThat(desc.get(ValueLayout.JAVA_INT, 0)).isEqualTo(DriverLayouts.LOCATION_TYPE_DEVICE);
            assertThat(desc.get(ValueLayout.JAVA_INT, 4)).isEqualTo(2);
            assertThat(desc.get(ValueLayout.JAVA_INT, 8)).isEqualTo(DriverLayouts.ACCESS_PROT_READWRITE);
        }
    }
}
