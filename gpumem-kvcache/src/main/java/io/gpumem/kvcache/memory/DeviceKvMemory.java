package io.gpumem.kvcache.memory;

import io.gpumem.device.Device;
import io.gpumem.kvcache.KvCacheException;
import java.util.Objects;

/** {@link KvMemory} that takes each region directly from {@link Device#malloc}; OOM becomes a clear error. */
final class DeviceKvMemory implements KvMemory {
    private final Device device;

    DeviceKvMemory(Device device) {
        this.device = Objects.requireNonNull(device, "device");
    }

    @Override
    public Device device() {
        return device;
    }

    @Override
    public long allocate(long bytes) {
        long address = device.malloc(bytes);
        if (address == Device.NULL) {
            throw new KvCacheException("KV cache: device " + device.name() + " has no room for a " + bytes
                    + "-byte layer region (" + device.freeMemory() + " bytes free)");
        }
        return address;
    }

    @Override
    public void free(long address) {
        device.free(address);
    }
}
