package io.gpumem.history;

import java.util.List;
import org.jspecify.annotations.Nullable;

/**
 * One entry of a memory history (allocator.md §10.5): an allocator decision or driver call, oldest first; what
 * gpumem's allocator records on its hot path and what a snapshot file's {@code device_traces} hold alike.
 *
 * <p>Meaning of {@code addr} and {@code size} by action: alloc = block address and unrounded request;
 * free_requested / free_completed = block address and the block's requested size; segment_alloc / segment_free
 * = segment base and size; segment_map / segment_unmap = range start and page-multiple size; snapshot = 0 and
 * total active bytes; oom = {@code addr} is unused (0) and {@code size} is the rounded request, with
 * {@code deviceFree} holding the free bytes the device reported.
 *
 * <p>Numeric fields are primitives so that replay loops read them without unboxing. Which optional keys a file
 * entry had, the action name as recorded (for {@link TraceAction#UNKNOWN}) and keys this version does not
 * interpret are in {@link #keys} (shared between entries with the same key set, so no object per entry); an
 * entry the allocator records has every key its snapshot writes: {@code addr} (but not for an oom),
 * {@code size}, {@code stream}, {@code time_us}, and {@code device_free} for an oom.
 *
 * @param action     what happened; {@link TraceAction#UNKNOWN} for names this version does not know
 * @param addr       address (see above; 0 when absent)
 * @param size       size in bytes (see above; 0 when absent)
 * @param stream     stream handle as a signed 64-bit value, 0 for the default stream (and when absent)
 * @param timeUs     microseconds from the allocator's clock (0 when absent; older PyTorch does not record it)
 * @param frames     the attached stack, innermost first; {@code null} when no context was captured (the file then
 *                   has no {@code frames} key, or {@code frames: None} with {@link #FRAMES_NONE}); may be a list
 *                   shared with other entries
 * @param deviceFree oom only: free device bytes; −1 whenever the {@link #DEVICE_FREE} key is absent
 * @param keys       which keys the entry has, its recorded action name and unknown keys
 */
public record TraceEntry(
        TraceAction action,
        long addr,
        long size,
        long stream,
        long timeUs,
        @Nullable List<Frame> frames,
        long deviceFree,
        FileKeys keys)
        implements FileRecord {

    public static final int ADDR = 1;
    public static final int SIZE = 2;
    public static final int STREAM = 4;
    public static final int TIME_US = 8;
    public static final int DEVICE_FREE = 16;
    /**
     * The file's entry had {@code frames: None} ({@link #frames()} is then null, as when the key is absent):
     * written back as None, which {@code _memory_viz.py} prints and treats otherwise than an absent key or [].
     */
    public static final int FRAMES_NONE = 32;

    private static final FileKeys RECORDED = FileKeys.of(ADDR | SIZE | STREAM | TIME_US);
    private static final FileKeys RECORDED_OOM = FileKeys.of(SIZE | STREAM | TIME_US | DEVICE_FREE);

    public TraceEntry {
        if (keys == null) {
            keys = recordedKeys(action);
        }
        if (!keys.has(DEVICE_FREE)) {
            deviceFree = -1;
        }
    }

    /** The keys of an entry as gpumem's allocators record it: every key its snapshot writes (see the class comment). */
    public static FileKeys recordedKeys(TraceAction action) {
        return action == TraceAction.OOM ? RECORDED_OOM : RECORDED;
    }

    /** An entry with the keys a current PyTorch records without time stamps: addr, size, stream; no frames. */
    public static TraceEntry of(TraceAction action, long addr, long size, long stream) {
        return new TraceEntry(action, addr, size, stream, 0, List.of(), -1, FileKeys.of(ADDR | SIZE | STREAM));
    }

    /**
     * Whether a trace records {@code free_completed} entries. A block is reusable when its free completes: in such
     * a trace at its {@code free_completed} entry, in one without (no stream events recorded) at its
     * {@code free_requested} entry.
     */
    public static boolean recordsFreeCompletions(List<TraceEntry> trace) {
        for (TraceEntry e : trace) {
            if (e.action() == TraceAction.FREE_COMPLETED) {
                return true;
            }
        }
        return false;
    }

    /** The action as recorded (the name of an {@link TraceAction#UNKNOWN} action included). */
    public String actionName() {
        return keys.spelled() != null ? keys.spelled() : action.wireName();
    }

    /** A copy with a time stamp. */
    public TraceEntry withTimeUs(long micros) {
        return new TraceEntry(
                action, addr, size, stream, micros, frames, deviceFree, keys.withPresent(keys.present() | TIME_US));
    }

    /** A copy at another address (a block the replay placed elsewhere). */
    public TraceEntry withAddr(long address) {
        return new TraceEntry(action, address, size, stream, timeUs, frames, deviceFree, keys);
    }

    @Override
    public String toString() {
        StringBuilder sb = new StringBuilder(actionName());
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
