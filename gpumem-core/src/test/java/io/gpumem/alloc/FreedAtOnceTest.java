package io.gpumem.alloc;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpumem.config.AllocatorConfig;
import io.gpumem.device.DeviceOp;
import io.gpumem.device.SimulatedDevice;
import io.gpumem.history.BlockState;
import io.gpumem.history.HistoryOptions;
import io.gpumem.oom.OutOfMemoryException;
import io.gpumem.stats.StatKind;
import java.util.ArrayList;
import java.util.List;
import java.util.SplittableRandom;
import org.junit.jupiter.api.Test;

/**
 * {@link CachingAllocator#tryMallocFreedAtOnce}: where it takes a malloc and the free of its block as one call, the
 * allocator ends exactly as the two calls leave it, and goes on deciding as it would have; where it does not, nothing
 * changed. Two allocators are built alike by playing the same seeded requests, then one takes the pair at once and
 * the other makes the two calls.
 */
class FreedAtOnceTest {
    private static final long MIB = 1L << 20;
    private static final long CAPACITY = 1L << 30;

    @Test
    void aPairTakenAtOnceLeavesWhatTheTwoCallsLeave() {
        long seed = Long.getLong("gpumem.seed", System.nanoTime());
        System.out.println("FreedAtOnceTest seed=" + seed);
        SplittableRandom rnd = new SplittableRandom(seed);
        for (String conf :
                List.of("", "max_split_size_mb:30", "roundup_power2_divisions:4", "expandable_segments:True")) {
            AllocatorConfig config = AllocatorConfig.parse(conf);
            int taken = 0;
            int refused = 0;
            for (int trial = 0; trial < 60; trial++) {
                long requests = rnd.nextLong();
                int prefix = rnd.nextInt(400);
                String what = "seed " + seed + " [" + conf + "] trial " + trial;
                Twin once = Twin.play(config, requests, prefix);
                Twin twice = Twin.play(config, requests, prefix);
                String before = once.state();
                assertThat(twice.state()).as(what + ": the twins start alike").isEqualTo(before);

                long size = request(rnd);
                long stream = rnd.nextInt(4) == 0 ? 1 : 0;
                long deviceCalls = twice.deviceCalls();
                boolean tookIt = once.allocator.tryMallocFreedAtOnce(size, stream);
                twice.mallocThenFree(size, stream);
                if (tookIt) {
                    taken++;
                    assertThat(twice.deviceCalls())
                            .as(what + ": a pair taken at once is one the cache serves")
                            .isEqualTo(deviceCalls);
                    assertThat(once.state()).as(what + ": after the pair").isEqualTo(twice.state());
                } else {
                    refused++;
                    assertThat(once.state())
                            .as(what + ": a refused pair changes nothing")
                            .isEqualTo(before);
                    once.mallocThenFree(size, stream);
                    assertThat(once.state()).as(what + ": then the two calls").isEqualTo(twice.state());
                }
                // hidden state (the trees, the ages) shows in what the twins decide next
                long after = requests ^ 0x9E3779B97F4A7C15L;
                assertThat(once.continueWith(new SplittableRandom(after), 80))
                        .as(what + ": the requests that follow")
                        .isEqualTo(twice.continueWith(new SplittableRandom(after), 80));
                assertThat(once.state()).as(what + ": at the end").isEqualTo(twice.state());
            }
            assertThat(taken)
                    .as("[%s] pairs taken at once, seed %d", conf, seed)
                    .isPositive();
            assertThat(refused).as("[%s] pairs refused, seed %d", conf, seed).isPositive();
        }
    }

    @Test
    void anAllocatorThatCountsOrRecordsNeverTakesThePair() {
        try (CachingAllocator counted = new CachingAllocator(SimulatedDevice.withCapacity(CAPACITY))) {
            counted.free(counted.malloc(8 * MIB, 0));
            assertThat(counted.tryMallocFreedAtOnce(4 * MIB, 0)).isFalse();
            assertThat(counted.stats().get(StatKind.ALLOCATION).allocated()).isEqualTo(1);
        }
        try (CachingAllocator recording =
                CachingAllocator.uncounted(SimulatedDevice.withCapacity(CAPACITY), AllocatorConfig.defaults())) {
            recording.free(recording.malloc(8 * MIB, 0));
            recording.internals().recordHistory(HistoryOptions.all());
            assertThat(recording.tryMallocFreedAtOnce(4 * MIB, 0)).isFalse();
            recording.internals().recordHistory(HistoryOptions.off());
            assertThat(recording.tryMallocFreedAtOnce(4 * MIB, 0)).isTrue();
            assertThat(recording.tryMallocFreedAtOnce(0, 0))
                    .as("an empty request")
                    .isFalse();
            assertThat(recording.tryMallocFreedAtOnce(64 * MIB, 0))
                    .as("a request the cache cannot serve")
                    .isFalse();
        }
    }

    @Test
    void theCollectorsClockOrPendingStreamEventsRefuseThePair() {
        // with a memory fraction and a collection threshold, every lookup ticks the pool's clock (the blocks' ages)
        AllocatorConfig gc = AllocatorConfig.parse("garbage_collection_threshold:0.5");
        try (CachingAllocator collecting = CachingAllocator.uncounted(SimulatedDevice.withCapacity(CAPACITY), gc)) {
            collecting.free(collecting.malloc(8 * MIB, 0));
            assertThat(collecting.tryMallocFreedAtOnce(4 * MIB, 0))
                    .as("no fraction set: the collector is off")
                    .isTrue();
            collecting.setMemoryFraction(0.9);
            assertThat(collecting.tryMallocFreedAtOnce(4 * MIB, 0)).isFalse();
        }
        // a block freed while another stream still uses it waits on an event; a malloc processes events first
        SimulatedDevice dev =
                SimulatedDevice.builder().capacity(CAPACITY).holdEvents(true).build();
        try (CachingAllocator waiting = CachingAllocator.uncounted(dev, AllocatorConfig.defaults())) {
            long side = dev.createStream();
            waiting.free(waiting.malloc(8 * MIB, 0));
            long used = waiting.malloc(MIB, 0);
            waiting.recordStream(used, side);
            waiting.free(used);
            assertThat(waiting.tryMallocFreedAtOnce(4 * MIB, 0)).isFalse();
            dev.completeAllEvents();
            waiting.free(waiting.malloc(MIB, 0)); // processes the completed event
            assertThat(waiting.tryMallocFreedAtOnce(4 * MIB, 0)).isTrue();
        }
    }

    /** Sizes from a few hundred bytes to 80 MiB: small-pool, large-pool and, under a 30 MiB limit, oversize. */
    private static long request(SplittableRandom rnd) {
        return switch (rnd.nextInt(3)) {
            case 0 -> 1 + rnd.nextInt(1 << 20);
            case 1 -> MIB + rnd.nextLong(20 * MIB);
            default -> 20 * MIB + rnd.nextLong(60 * MIB);
        };
    }

    /** An uncounted allocator on its own device, brought to a state by seeded requests. */
    private static final class Twin {
        final SimulatedDevice device = SimulatedDevice.withCapacity(CAPACITY);
        final CachingAllocator allocator;
        final List<Long> live = new ArrayList<>();

        private Twin(AllocatorConfig config) {
            allocator = CachingAllocator.uncounted(device, config);
        }

        static Twin play(AllocatorConfig config, long seed, int requests) {
            Twin t = new Twin(config);
            t.continueWith(new SplittableRandom(seed), requests);
            return t;
        }

        /** Plays {@code requests} random requests; returns what each malloc answered (0 for out of memory). */
        List<Long> continueWith(SplittableRandom rnd, int requests) {
            List<Long> answers = new ArrayList<>();
            for (int i = 0; i < requests; i++) {
                int r = rnd.nextInt(100);
                if (r < 55 || live.isEmpty()) {
                    long address = mallocOrZero(request(rnd), rnd.nextInt(4) == 0 ? 1 : 0);
                    answers.add(address);
                    if (address != 0) {
                        live.add(address);
                    }
                } else if (r < 98) {
                    int at = rnd.nextInt(live.size());
                    allocator.free(live.get(at));
                    live.set(at, live.getLast());
                    live.removeLast();
                } else {
                    allocator.emptyCache();
                }
            }
            return answers;
        }

        void mallocThenFree(long size, long stream) {
            long address = mallocOrZero(size, stream);
            if (address != 0) {
                allocator.free(address);
            }
        }

        private long mallocOrZero(long size, long stream) {
            try {
                return allocator.malloc(size, stream);
            } catch (OutOfMemoryException e) {
                return 0;
            }
        }

        long deviceCalls() {
            return device.callCount(DeviceOp.MALLOC)
                    + device.callCount(DeviceOp.MAP)
                    + device.callCount(DeviceOp.FREE)
                    + device.callCount(DeviceOp.UNMAP);
        }

        /** Every segment and block (address, size, requested size, state), in address order, and the bytes used. */
        String state() {
            List<String> segments = new ArrayList<>();
            allocator.internals().visitSegments(new AllocatorInternals.SegmentVisitor() {
                @Override
                public void segment(long address, long stream, Pool pool, boolean expandable) {
                    segments.add(Long.toHexString(address));
                }

                @Override
                public void block(long address, long size, long requestedSize, BlockState state) {
                    segments.set(
                            segments.size() - 1,
                            segments.getLast() + " " + Long.toHexString(address) + ":" + size + ":" + requestedSize
                                    + ":" + state);
                }
            });
            segments.sort(null);
            return device.consumedBytes() + " bytes used; " + String.join("; ", segments);
        }
    }
}
