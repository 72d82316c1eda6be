package io.gpumem.device;

/**
 * What a {@link Device} is, fixed when it is opened: the facts every implementation keeps and reports the same way
 * (the {@link Device} methods of the same names read them from here), as opposed to what it does.
 *
 * @param name                  human-readable name, e.g. {@code "NVIDIA H200"} or {@code "simulated"}
 * @param index                 device ordinal, as in {@code torch.cuda.current_device()}
 * @param totalMemory           total device memory in bytes (what {@code cudaMemGetInfo} reports as total)
 * @param supportsVirtualMemory whether the virtual-memory family of calls is supported (CUDA attribute 102)
 * @param allocationGranularity minimum granularity of physical allocations and mappings
 *                              ({@code cuMemGetAllocationGranularity})
 */
public record DeviceProperties(
        String name, int index, long totalMemory, boolean supportsVirtualMemory, long allocationGranularity) {

    /** The same device with another total memory (a simulated device copied at another capacity). */
    public DeviceProperties withTotalMemory(long bytes) {
        return new DeviceProperties(name, index, bytes, supportsVirtualMemory, allocationGranularity);
    }
}
