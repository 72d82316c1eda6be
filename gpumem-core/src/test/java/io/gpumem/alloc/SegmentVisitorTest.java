package io.gpumem.alloc;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpumem.config.AllocatorConfig;
import io.gpumem.device.SimulatedDevice;
import io.gpumem.history.BlockInfo;
import io.gpumem.history.BlockState;
import io.gpumem.history.SegmentInfo;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import org.junit.jupiter.api.Test;

/** {@link AllocatorInternals#visitSegments} reports exactly the segments and blocks a snapshot holds. */
class SegmentVisitorTest {

    @Test
    void visitingReportsWhatASnapshotHolds() {
        long seed = System.nanoTime();
        System.out.println("seed=" + seed);
        Random rnd = new Random(seed);
        for (String conf : List.of("", "expandable_segments:True", "max_split_size_mb:64")) {
            try (CachingAllocator a =
                    new CachingAllocator(SimulatedDevice.withCapacity(1L << 40), AllocatorConfig.parse(conf))) {
                long side = a.device().createStream();
                List<Long> live = new ArrayList<>();
                for (int step = 0; step < 3000; step++) {
                    if (live.isEmpty() || rnd.nextInt(5) < 3) {
                        long size = rnd.nextBoolean() ? 1 + rnd.nextInt(1 << 20) : 1 + rnd.nextInt(64 << 20);
                        live.add(a.malloc(size, rnd.nextInt(2)));
                    } else {
                        long p = live.remove(rnd.nextInt(live.size()));
                        if (rnd.nextInt(4) == 0) {
                            // used on a side stream too: freed, the block waits on an event (pending) until a later
                            // malloc sees the event complete
                            a.recordStream(p, side);
                        }
                        a.free(p);
                    }
                    if (rnd.nextInt(500) == 0) {
                        a.emptyCache();
                    }
                    if (step % 250 == 0) {
                        assertThat(visited(a))
                                .as("seed %d, %s, step %d", seed, conf, step)
                                .containsExactlyInAnyOrderElementsOf(snapshotted(a));
                    }
                }
                // and at least once with a block pending on its events
                long p = a.malloc(1 << 20, 0);
                a.recordStream(p, side);
                a.free(p);
                assertThat(a.internals().pendingFreeBlocks()).isPositive();
                assertThat(visited(a))
                        .as("seed %d, %s, pending", seed, conf)
                        .containsExactlyInAnyOrderElementsOf(snapshotted(a));
            }
        }
    }

    /** Each segment as one line: its address, stream, pool and kind, then its blocks (address, size, requested size, state). */
    private static List<String> visited(CachingAllocator a) {
        List<StringBuilder> segments = new ArrayList<>();
        a.internals().visitSegments(new AllocatorInternals.SegmentVisitor() {
            @Override
            public void segment(long address, long stream, Pool pool, boolean expandable) {
                segments.add(new StringBuilder(head(address, stream, pool, expandable)));
            }

            @Override
            public void block(long address, long size, long requestedSize, BlockState state) {
                segments.getLast().append(' ').append(line(address, size, requestedSize, state));
            }
        });
        return segments.stream().map(StringBuilder::toString).toList();
    }

    private static List<String> snapshotted(CachingAllocator a) {
        List<String> out = new ArrayList<>();
        for (SegmentInfo s : a.snapshot().segments()) {
            StringBuilder b = new StringBuilder(head(s.address(), s.stream(), s.pool(), s.expandable()));
            for (BlockInfo blk : s.blocks()) {
                b.append(' ').append(line(blk.address(), blk.size(), blk.requestedSize(), blk.state()));
            }
            out.add(b.toString());
        }
        return out;
    }

    private static String head(long address, long stream, Pool pool, boolean expandable) {
        return Long.toHexString(address) + " stream " + stream + " " + pool + (expandable ? " expandable" : "");
    }

    private static String line(long address, long size, long requestedSize, BlockState state) {
        return Long.toHexString(address) + ":" + size + ":" + requestedSize + ":" + state;
    }
}
