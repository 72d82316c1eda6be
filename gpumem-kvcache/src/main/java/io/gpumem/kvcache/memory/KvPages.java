package io.gpumem.kvcache.memory;

import io.gpumem.device.Device;
import io.gpumem.kvcache.KvCacheException;
import io.gpumem.kvcache.KvCacheSpec;
import java.lang.foreign.MemorySegment;

/**
 * The KV cache's device memory: one region per layer, carved into {@code numBlocks} pages of
 * {@link KvCacheSpec#pageBytes()}; block id {@code b} is page {@code b} of every layer, so one block is
 * contiguous bytes per layer (block-major layout, cheap to copy and to swap).
 *
 * <p>Page layout: K for the block's tokens, then V; each is {@code blockSize × kvHeads × headSize}
 * elements, token-major ({@code [slot][head][dim]}).
 *
 * <p>Regions are allocated all at once; if one fails, those already taken are given back, so a
 * failed construction leaves nothing allocated. {@link #close()} frees them.
 */
public final class KvPages implements AutoCloseable {
    private final KvCacheSpec spec;
    private final KvMemory memory;
    private final Device device;
    private final long[] layerBase;
    private final long pageBytes;
    private final long tokenBytes;
    private boolean closed;
    private long copyCalls;

    public KvPages(KvCacheSpec spec, KvMemory memory) {
        this.spec = spec;
        this.memory = memory;
        this.device = memory.device();
        this.pageBytes = spec.pageBytes();
        this.tokenBytes = spec.tokenBytes();
        this.layerBase = new long[spec.layers()];
        int done = 0;
        try {
            for (; done < layerBase.length; done++) {
                layerBase[done] = memory.allocate(spec.layerBytes());
            }
        } catch (RuntimeException e) {
            for (int i = 0; i < done; i++) {
                memory.free(layerBase[i]);
            }
            throw e;
        }
    }

    public KvCacheSpec spec() {
        return spec;
    }

    public Device device() {
        return device;
    }

    /** Device address of a layer's region. */
    public long layerAddress(int layer) {
        return layerBase[layer];
    }

    /** Device address of a block's page in a layer. */
    public long pageAddress(int layer, int block) {
        return layerBase[layer] + block * pageBytes;
    }

    /** Device address of the K (or V) vector of one token slot. */
    public long slotAddress(int layer, int block, int slot, boolean value) {
        return pageAddress(layer, block) + (value ? spec.blockSize() * tokenBytes : 0) + slot * tokenBytes;
    }

    /** Writes one token's K and V ({@link KvCacheSpec#tokenBytes()} each) into a slot of a block. */
    public void writeSlot(int layer, int block, int slot, MemorySegment k, MemorySegment v) {
        checkOpen();
        device.copyToDevice(slotAddress(layer, block, slot, false), k, tokenBytes);
        device.copyToDevice(slotAddress(layer, block, slot, true), v, tokenBytes);
    }

    /** Copies one page into host memory ({@code dst} at least {@link KvCacheSpec#pageBytes()}). */
    public void readPage(int layer, int block, MemorySegment dst) {
        checkOpen();
        device.copyToHost(dst, pageAddress(layer, block), pageBytes);
    }

    /** Copies block {@code src} onto block {@code dst} in every layer (copy-on-write). */
    public void copyBlock(int src, int dst) {
        checkOpen();
        for (int layer = 0; layer < layerBase.length; layer++) {
            device.copyDeviceToDevice(pageAddress(layer, dst), pageAddress(layer, src), pageBytes);
        }
        copyCalls += layerBase.length;
    }

    /** Device-to-device bytes copied by copy-on-write so far: one page a {@link #copyCalls() call}. */
    public long copiedBytes() {
        return copyCalls * pageBytes;
    }

    /** Device-to-device copy calls made by copy-on-write so far. */
    public long copyCalls() {
        return copyCalls;
    }

    private void checkOpen() {
        if (closed) {
            throw new KvCacheException("KV pages already closed");
        }
    }

    @Override
    public void close() {
        if (closed) {
            return;
        }
        closed = true;
        for (long base : layerBase) {
            memory.free(base);
        }
    }
}
