package io.gpumem.trace.io;

import io.gpumem.history.BlockState;
import io.gpumem.history.Frame;
import java.util.List;
import java.util.Map;

/**
 * One block of a snapshot segment (allocator.md §10.4). Blocks of a segment tile it in address order.
 *
 * <p>{@code address} is always set: 2.0 files omit it, and the reader computes it as the segment address
 * plus the sizes of the preceding blocks (what PyTorch itself does); {@link #ADDRESS} in {@code fields} says
 * whether the file carried it. {@code frames} and {@code history} are {@code null} when absent;
 * {@code extra} keeps keys this version does not interpret.
 *
 * <p>Kept apart from gpumem-core's {@code io.gpumem.history.BlockInfo} (whose {@link BlockState} and
 * {@link Frame} it shares) for the same reason as {@link TraceEntry}: the file model also records which keys
 * were present, the state name as spelled ({@code active_awaiting_free}, unknown names), 2.0's per-block
 * {@code history} and unknown keys, none of which the allocator has.
 */
public record BlockInfo(
        long address,
        long size,
        long requestedSize,
        BlockState state,
        String stateName,
        List<Frame> frames,
        List<BlockHistory> history,
        Map<String, Object> extra,
        int fields) {

    public static final int ADDRESS = 1;
    public static final int REQUESTED_SIZE = 2;

    public BlockInfo {
        extra = extra == null ? Map.of() : extra;
    }

    /** A block as a current PyTorch reports it, with an empty stack. */
    public static BlockInfo of(long address, long size, long requestedSize, BlockState state) {
        return new BlockInfo(address, size, requestedSize, state, state.wireName(), List.of(), null, Map.of(),
                ADDRESS | REQUESTED_SIZE);
    }

    public boolean has(int field) {
        return (fields & field) != 0;
    }
}
