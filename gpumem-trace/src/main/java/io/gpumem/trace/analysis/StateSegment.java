package io.gpumem.trace.analysis;

import io.gpumem.history.BlockState;

import io.gpumem.alloc.Pool;

import java.util.List;

/**
 * One segment at the analysed moment: a cudaMalloc'd range, or for expandable segments one contiguous
 * mapped run (as PyTorch snapshots report them).
 *
 * <p>Invariant checked on construction: the blocks are non-empty, ordered and contiguous, starting at the
 * segment's address. Totals are derived from the blocks, so they cannot disagree with them.
 */
public record StateSegment(long address, long stream, Pool pool, boolean expandable, List<StateBlock> blocks) {
    public StateSegment {
        if (pool == null) {
            throw new IllegalArgumentException("segment at 0x" + Long.toHexString(address) + " has no pool");
        }
        blocks = List.copyOf(blocks);
        if (blocks.isEmpty()) {
            throw new IllegalArgumentException("segment at 0x" + Long.toHexString(address) + " has no blocks");
        }
        long next = address;
        for (StateBlock b : blocks) {
            if (b.address() != next) {
                throw new IllegalArgumentException("segment at 0x" + Long.toHexString(address) + ": block at 0x"
                        + Long.toHexString(b.address()) + " does not follow the previous block (expected 0x"
                        + Long.toHexString(next) + ")");
            }
            next += b.size();
        }
    }

    /** Sum of the block sizes. */
    public long totalSize() {
        long total = 0;
        for (StateBlock b : blocks) {
            total += b.size();
        }
        return total;
    }

    /** Bytes in blocks of the given state. */
    public long bytesIn(BlockState state) {
        long total = 0;
        for (StateBlock b : blocks) {
            if (b.state() == state) {
                total += b.size();
            }
        }
        return total;
    }

    /** Whether every block is inactive (the whole segment is cached and, unless expandable, releasable as is). */
    public boolean isFullyFree() {
        for (StateBlock b : blocks) {
            if (b.state() != BlockState.INACTIVE) {
                return false;
            }
        }
        return true;
    }

    /** One past the last byte. */
    public long end() {
        return address + totalSize();
    }
}
