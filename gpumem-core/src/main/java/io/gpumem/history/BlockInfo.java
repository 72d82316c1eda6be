package io.gpumem.history;

import java.util.List;
import org.jspecify.annotations.Nullable;

/**
 * One block of a snapshot segment (allocator.md §10.4): in the allocator's snapshot, in a snapshot file, in the
 * state an analysis looks at and in the state a trace window starts from. Blocks of a segment tile it in address
 * order.
 *
 * <p>A file's block also says, in {@link #keys}, whether it carried {@code address} and {@code requested_size}
 * (2.0 files have neither: the reader computes the address as PyTorch does, segment address plus the sizes
 * before it), the state name as spelled ({@code active_awaiting_free}, unknown names, which read as
 * {@link BlockState#UNKNOWN}), 2.0's per-block {@code history} and unknown keys. Blocks made by the allocator,
 * an analysis or the window rebuild share one plain form.
 *
 * @param address       block start
 * @param size          block size
 * @param requestedSize the unrounded size of its last allocation; for a free block the stale value PyTorch keeps
 *                      (0 for a block split off and never allocated, or when unknown)
 * @param state         allocation state
 * @param frames        stack of the last allocation, innermost first; empty when none was captured, {@code null}
 *                      when a file has no {@code frames} key
 * @param keys          which keys a file had for the block, beyond these values
 */
public record BlockInfo(
        long address,
        long size,
        long requestedSize,
        BlockState state,
        @Nullable List<Frame> frames,
        FileKeys keys) implements FileRecord {

    public static final int ADDRESS = 1;
    public static final int REQUESTED_SIZE = 2;
    /** The file's block had {@code frames: None} ({@code frames} is then null, as when the key is absent). */
    public static final int FRAMES_NONE = 4;

    private static final FileKeys PLAIN = FileKeys.of(ADDRESS | REQUESTED_SIZE);

    public BlockInfo {
        if (keys == null) {
            keys = PLAIN;
        }
    }

    /** A block with every key a current PyTorch writes. */
    public BlockInfo(long address, long size, long requestedSize, BlockState state, @Nullable List<Frame> frames) {
        this(address, size, requestedSize, state, frames, PLAIN);
    }

    /** A block as a current PyTorch reports it, with an empty stack. */
    public static BlockInfo of(long address, long size, long requestedSize, BlockState state) {
        return new BlockInfo(address, size, requestedSize, state, List.of(), PLAIN);
    }

    /** The state as spelled in the file (the model's name unless the file spelled it otherwise). */
    public String stateName() {
        return keys.spelled() != null ? keys.spelled() : state.wireName();
    }

    /** A 2.0 file's per-block history; {@code null} when absent. */
    public @Nullable List<BlockHistory> history() {
        return keys.history();
    }

    /** One past the last byte. */
    public long end() {
        return address + size;
    }

    /** Whether the block is allocated to the user (not free, not waiting on stream events). */
    public boolean isAllocated() {
        return state == BlockState.ACTIVE_ALLOCATED;
    }

    /** Bytes the caller asked for and the block does not use: rounding and whole-block takes (0 when not allocated). */
    public long internalSlack() {
        return isAllocated() ? Math.max(0, size - Math.min(Math.max(0, requestedSize), size)) : 0;
    }
}
