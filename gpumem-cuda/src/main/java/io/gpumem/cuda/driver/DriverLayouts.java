package io.gpumem.cuda.driver;

import static java.lang.foreign.MemoryLayout.sequenceLayout;
import static java.lang.foreign.MemoryLayout.structLayout;
import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_BYTE;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_SHORT;

import java.lang.foreign.MemoryLayout.PathElement;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.SegmentAllocator;
import java.lang.foreign.StructLayout;
import java.lang.invoke.VarHandle;

/**
 * The CUDA driver structs gpumem passes by pointer, as FFM layouts (x86-64 / aarch64 Linux, CUDA 12-13,
 * the {@code _v1} struct versions).
 *
 * <pre>
 * CUmemLocation        (8 B, align 4)   type:int @0, id:int @4
 * CUmemAllocationProp  (32 B, align 8)  type:int @0, requestedHandleTypes:int @4, location @8,
 *                                       win32HandleMetaData:void* @16,
 *                                       allocFlags { compressionType:u8 @24, gpuDirectRDMACapable:u8 @25,
 *                                                    usage:u16 @26, reserved:u8[4] @28 }
 * CUmemAccessDesc      (12 B, align 4)  location @0, flags:int @8
 * </pre>
 *
 * None of them has implicit padding; the layout tests pin every offset, because NVIDIA versions a changed
 * struct with a new {@code _v2} type and entry point rather than changing these.
 */
public final class DriverLayouts {
    private DriverLayouts() {}

    /** {@code CUmemLocation}. */
    public static final StructLayout MEM_LOCATION =
            structLayout(JAVA_INT.withName("type"), JAVA_INT.withName("id")).withName("CUmemLocation");

    /** The anonymous {@code allocFlags} struct inside {@code CUmemAllocationProp}. */
    public static final StructLayout ALLOC_FLAGS = structLayout(
                    JAVA_BYTE.withName("compressionType"),
                    JAVA_BYTE.withName("gpuDirectRDMACapable"),
                    JAVA_SHORT.withName("usage"),
                    sequenceLayout(4, JAVA_BYTE).withName("reserved"))
            .withName("allocFlags");

    /** {@code CUmemAllocationProp}. */
    public static final StructLayout MEM_ALLOCATION_PROP = structLayout(
                    JAVA_INT.withName("type"),
                    JAVA_INT.withName("requestedHandleTypes"),
                    MEM_LOCATION.withName("location"),
                    ADDRESS.withName("win32HandleMetaData"),
                    ALLOC_FLAGS.withName("allocFlags"))
            .withName("CUmemAllocationProp");

    /** {@code CUmemAccessDesc}. */
    public static final StructLayout MEM_ACCESS_DESC = structLayout(
                    MEM_LOCATION.withName("location"), JAVA_INT.withName("flags"))
            .withName("CUmemAccessDesc");

    /** {@code CU_MEM_ALLOCATION_TYPE_PINNED}. */
    public static final int ALLOCATION_TYPE_PINNED = 1;
    /** {@code CU_MEM_LOCATION_TYPE_DEVICE}. */
    public static final int LOCATION_TYPE_DEVICE = 1;
    /** {@code CU_MEM_HANDLE_TYPE_NONE}. */
    public static final int HANDLE_TYPE_NONE = 0;
    /** {@code CU_MEM_ACCESS_FLAGS_PROT_READWRITE}. */
    public static final int ACCESS_PROT_READWRITE = 3;

    private static final VarHandle PROP_TYPE = MEM_ALLOCATION_PROP.varHandle(PathElement.groupElement("type"));
    private static final VarHandle PROP_HANDLE_TYPES =
            MEM_ALLOCATION_PROP.varHandle(PathElement.groupElement("requestedHandleTypes"));
    private static final long PROP_LOCATION = MEM_ALLOCATION_PROP.byteOffset(PathElement.groupElement("location"));
    private static final long ACCESS_LOCATION = MEM_ACCESS_DESC.byteOffset(PathElement.groupElement("location"));
    private static final VarHandle ACCESS_FLAGS = MEM_ACCESS_DESC.varHandle(PathElement.groupElement("flags"));
    private static final VarHandle LOCATION_TYPE = MEM_LOCATION.varHandle(PathElement.groupElement("type"));
    private static final VarHandle LOCATION_ID = MEM_LOCATION.varHandle(PathElement.groupElement("id"));

    /**
     * A zeroed {@code CUmemAllocationProp} for pinned device memory on {@code ordinal}, no shareable handle
     * type, no compression: what {@code cuMemCreate} and {@code cuMemGetAllocationGranularity} need.
     */
    public static MemorySegment pinnedDeviceProp(SegmentAllocator allocator, int ordinal) {
        MemorySegment prop = zeroed(allocator, MEM_ALLOCATION_PROP);
        PROP_TYPE.set(prop, 0L, ALLOCATION_TYPE_PINNED);
        PROP_HANDLE_TYPES.set(prop, 0L, HANDLE_TYPE_NONE);
        onDevice(prop, PROP_LOCATION, ordinal);
        return prop;
    }

    /** A {@code CUmemAccessDesc} granting read-write access to device {@code ordinal}. */
    public static MemorySegment readWriteAccess(SegmentAllocator allocator, int ordinal) {
        MemorySegment desc = zeroed(allocator, MEM_ACCESS_DESC);
        onDevice(desc, ACCESS_LOCATION, ordinal);
        ACCESS_FLAGS.set(desc, 0L, ACCESS_PROT_READWRITE);
        return desc;
    }

    private static MemorySegment zeroed(SegmentAllocator allocator, StructLayout layout) {
        MemorySegment struct = allocator.allocate(layout);
        struct.fill((byte) 0);
        return struct;
    }

    /** Sets the {@code CUmemLocation} at {@code offset} in {@code struct} to device {@code ordinal}. */
    private static void onDevice(MemorySegment struct, long offset, int ordinal) {
        LOCATION_TYPE.set(struct, offset, LOCATION_TYPE_DEVICE);
        LOCATION_ID.set(struct, offset, ordinal);
    }
}
