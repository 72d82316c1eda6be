package io.gpumem.trace.io;

import io.gpumem.history.Frame;
import io.gpumem.history.TraceAction;
import java.util.List;
import java.util.Map;

/**
 * One entry of a device trace (allocator.md §10.5): an allocator decision or driver call, oldest first.
 *
 * <p>Numeric fields are primitives so that replay loops read them without unboxing; which of them the
 * file actually carried is kept in {@link #fields()} (bits {@link #ADDR}, {@link #SIZE}, ...), so that a
 * writer reproduces the same keys. {@code frames} is {@code null} when the key was absent and may be a
 * list shared with other entries (PyTorch de-duplicates identical stacks). {@code extra} holds every key
 * this version does not interpret (e.g. {@code compile_context}, {@code user_metadata}) with its value as
 * unpickled, in file order.
 *
 * <p>Kept apart from gpumem-core's {@code io.gpumem.history.TraceEntry} (whose {@link TraceAction} and
 * {@link Frame} it shares): that one is what the allocator records on its hot path, one per event, and carries
 * only what the allocator knows ({@code deviceFree} −1 when not an oom); this one must also say which keys a
 * file had ({@code fields}), keep the action name as recorded (for {@link TraceAction#UNKNOWN}) and keep unknown
 * keys, so that a read-write round trip is lossless. {@link AllocatorSnapshots} is the one conversion between
 * the two, both ways (core's −1 {@code deviceFree} is this model's absent {@link #DEVICE_FREE} key).
 *
 * @param action     the decoded action, {@link TraceAction#UNKNOWN} for names this version does not know
 * @param actionName the action string as recorded
 * @param addr       block, segment or range address (0 when absent)
 * @param size       request, segment or range size (0 when absent)
 * @param stream     stream handle as a signed 64-bit value (0 when absent)
 * @param timeUs     microseconds since the epoch (0 when absent; older PyTorch does not record it)
 * @param deviceFree free device bytes reported with an {@code oom} entry; −1 when absent, as in core's model
 *                   (whatever a caller passes: presence is {@link #DEVICE_FREE})
 */
public record TraceEntry(
        TraceAction action,
        String actionName,
        long addr,
        long size,
        long stream,
        long timeUs,
        long deviceFree,
        List<Frame> frames,
        Map<String, Object> extra,
        int fields) {

    public static final int ADDR = 1;
    public static final int SIZE = 2;
    public static final int STREAM = 4;
    public static final int TIME_US = 8;
    public static final int DEVICE_FREE = 16;

    public TraceEntry {
        extra = extra == null ? Map.of() : extra;
        if ((fields & DEVICE_FREE) == 0) {
            deviceFree = -1;
        }
    }

    /** An entry with the fields a current PyTorch records (addr, size, stream; optional time and frames). */
    public static TraceEntry of(TraceAction action, long addr, long size, long stream) {
        return new TraceEntry(action, action.wireName(), addr, size, stream, 0, 0, List.of(), Map.of(),
                ADDR | SIZE | STREAM);
    }

    /** A copy with a time stamp. */
    public TraceEntry withTimeUs(long micros) {
        return new TraceEntry(action, actionName, addr, size, stream, micros, deviceFree, frames, extra,
                fields | TIME_US);
    }

    /** A copy at another address (a block the replay placed elsewhere). */
    public TraceEntry withAddr(long address) {
        return new TraceEntry(action, actionName, address, size, stream, timeUs, deviceFree, frames, extra, fields);
    }

    public boolean has(int field) {
        return (fields & field) != 0;
    }

    @Override
    public String toString() {
        StringBuilder sb = new StringBuilder(actionName);
        if (has(ADDR)) {
            sb.append(" addr=0x").append(Long.toHexString(addr));
        }
        if (has(SIZE)) {
            sb.append(" size=").append(size);
        }
        if (has(STREAM)) {
            sb.append(" stream=").append(stream);
        }
        if (has(DEVICE_FREE)) {
            sb.append(" device_free=").append(deviceFree);
        }
        return sb.toString();
    }
}
