package io.gpumem.bench.alloc;

import io.gpumem.alloc.GpuAllocator;
import io.gpumem.device.DeviceOp;
import io.gpumem.device.SimulatedDevice;
import io.gpumem.engine.RequestStream;
import java.util.HashMap;
import java.util.Map;

/**
 * The engine's {@link RequestStream} replayed in an endless loop on one {@link GpuAllocator}, with no garbage and
 * no map lookup per op: the measured loop of the allocator benchmarks.
 *
 * <p>Setup plays ops {@code [0, loopStart)} once (state that lives throughout, such as a model's weights), then
 * takes the rest {@link RequestStream#balanced balanced} (blocks it leaves live are freed at its end, in
 * allocation order) and flattens it for the loop: per op the request size ({@code 0} for a free), the slot in
 * {@link RequestStream#compactSlots() compact} numbering (so {@link #live} is only as long as the peak live
 * count) and the index of its stream in a small table of device streams. Stream handles other than 0 get a device stream each, created in setup.
 *
 * <p>Score: {@link #pair()} performs the next two ops, wrapping around. The loop holds as many mallocs as frees,
 * so over whole passes one call is one malloc and one free and JMH's ops/s is pairs/s; within a pass the two ops
 * can both be mallocs (forward pass) or both frees (backward pass), and a measurement iteration that stops
 * mid-pass is off by less than one pass (a few thousand ops against millions).
 */
final class StreamLoop {
    final GpuAllocator allocator;
    final SimulatedDevice device;
    private final long[] sizes;
    private final int[] slots;
    private final int[] streamOf;
    private final long[] streamTable;
    private final long[] live;
    private int next;

    StreamLoop(GpuAllocator allocator, SimulatedDevice device, RequestStream stream, int loopStart) {
        if (stream.startBlocks() > 0) {
            throw new IllegalArgumentException("a benchmark stream starts from an empty allocator");
        }
        this.allocator = allocator;
        this.device = device;
        Map<Long, Long> deviceStreams = new HashMap<>();
        long[] prefix = new long[stream.slots()];
        for (int k = 0; k < loopStart; k++) {
            switch (stream.op(k)) {
                case RequestStream.ALLOC ->
                    prefix[stream.slot(k)] =
                            allocator.malloc(stream.size(k), deviceStream(deviceStreams, stream.stream(k)));
                case RequestStream.FREE -> allocator.free(prefix[stream.slot(k)]);
                default -> {}
            }
        }
        RequestStream loop = stream.balanced(loopStart, stream.length());
        if (loop.length() == 0) {
            throw new IllegalArgumentException("nothing to loop after op " + loopStart);
        }
        sizes = loop.requestSizes();
        slots = loop.compactSlots();
        streamOf = loop.streamIndexes();
        long[] handles = loop.streams();
        streamTable = new long[handles.length];
        for (int j = 0; j < handles.length; j++) {
            streamTable[j] = deviceStream(deviceStreams, handles[j]);
        }
        for (int k = 0; k < sizes.length; k++) {
            if (loop.op(k) == RequestStream.ALLOC && sizes[k] <= 0) {
                throw new IllegalArgumentException("op " + k + " requests " + sizes[k] + " bytes: the loop tells"
                        + " a malloc from a free by a positive size");
            }
        }
        live = new long[loop.peakLiveBlocks()];
    }

    private long deviceStream(Map<Long, Long> deviceStreams, long handle) {
        return handle == 0 ? 0 : deviceStreams.computeIfAbsent(handle, h -> device.createStream());
    }

    /** Malloc+free pairs in one pass. */
    int pairsPerPass() {
        return sizes.length / 2;
    }

    /** Slots of the loop: the most blocks it holds live at once. */
    int slotCount() {
        return live.length;
    }

    /** The next two ops of the loop. */
    long pair() {
        long first = op();
        return first ^ op();
    }

    /** A whole pass from wherever the loop stands. */
    long pass() {
        long x = 0;
        for (int i = sizes.length / 2; i > 0; i--) {
            x ^= op();
            x ^= op();
        }
        return x;
    }

    /** Runs {@code passes} whole passes (at least one) and returns the device mallocs of the last. */
    long warm(int passes) {
        long before = 0;
        for (int p = 0; p < passes; p++) {
            before = device.callCount(DeviceOp.MALLOC);
            pass();
        }
        return device.callCount(DeviceOp.MALLOC) - before;
    }

    private long op() {
        int i = next;
        long size = sizes[i];
        long p;
        if (size != 0) {
            p = allocator.malloc(size, streamTable[streamOf[i]]);
            live[slots[i]] = p;
        } else {
            p = live[slots[i]];
            allocator.free(p);
        }
        next = i + 1 == sizes.length ? 0 : i + 1;
        return p;
    }
}
