package io.gpumem.policy;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.gpumem.alloc.GpuAllocator;
import io.gpumem.alloc.Pool;
import io.gpumem.device.DeviceError;
import io.gpumem.device.DeviceOp;
import io.gpumem.device.SimulatedDevice;
import io.gpumem.history.BlockInfo;
import io.gpumem.history.BlockState;
import io.gpumem.history.Frame;
import io.gpumem.history.HistoryOptions;
import io.gpumem.history.SegmentInfo;
import io.gpumem.history.TraceAction;
import io.gpumem.history.TraceEntry;
import io.gpumem.oom.OomReport;
import io.gpumem.oom.OutOfMemoryException;
import io.gpumem.stats.MemoryStats;
import io.gpumem.stats.StatKind;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.Test;

/**
 * The RMM pool model against RMM's rules (policies.md §5), each worked out by hand on a simulated device whose
 * {@code cudaMalloc}s lie end to end: best fit by size then address, coalescing that stops at an upstream block's
 * head, the growth rules with and without a maximum and the halving on failure, the order of the per-stream lists
 * (own, another's, the others merged in, growth), the default initial pool, the options, and a seeded random run
 * that checks the invariants and the stats after every step.
 */
class RmmPoolAllocatorTest {

    private static final long MiB = 1L << 20;

    private static SimulatedDevice device(long capacity) {
        return SimulatedDevice.withCapacity(capacity);
    }

    private static RmmPoolAllocator pool(SimulatedDevice dev, long initial, long max) {
        return new RmmPoolAllocator(dev, initial, max);
    }

    private static long reserved(GpuAllocator a) {
        return a.stats().get(StatKind.RESERVED_BYTES).current();
    }

    /** The blocks of the snapshot, address to state, and the segments' (address, size). */
    private static Map<Long, BlockState> blocks(GpuAllocator a) {
        Map<Long, BlockState> m = new HashMap<>();
        for (SegmentInfo s : a.snapshot().segments()) {
            for (BlockInfo b : s.blocks()) {
                m.put(b.address(), b.state());
            }
        }
        return m;
    }

    @Test
    void requestsRoundTo256BytesAndTheBestFitIsTheSmallestThenTheLowest() {
        RmmPoolAllocator a = pool(device(1L << 30), 10 * MiB, -1);
        long base = a.malloc(1 * MiB, 0); // A
        long b = a.malloc(2 * MiB, 0); // B
        a.malloc(1 * MiB, 0); // C
        long d = a.malloc(3 * MiB, 0); // D
        a.malloc(1 * MiB, 0); // E; 2 MiB left at base + 8 MiB
        assertThat(b).isEqualTo(base + MiB);
        assertThat(d).isEqualTo(base + 4 * MiB);
        a.free(b);
        a.free(d);
        // free: B (2 MiB at +1), D (3 MiB at +4), the rest (2 MiB at +8): B and the rest tie, B is lower
        assertThat(a.malloc(2 * MiB, 0)).isEqualTo(b);
        // 1.5 MiB: the rest (2 MiB) fits more tightly than D (3 MiB)
        assertThat(a.malloc(3 * MiB / 2, 0)).isEqualTo(base + 8 * MiB);
        // 1 byte takes 256: the next block starts 256 bytes on
        long one = a.malloc(1, 0);
        long two = a.malloc(1, 0);
        assertThat(two - one).isEqualTo(RmmPoolAllocator.ALIGNMENT);
        assertThat(a.stats().get(StatKind.ALLOCATED_BYTES).current())
                .isEqualTo(1 * MiB + 2 * MiB + 1 * MiB + 1 * MiB + 3 * MiB / 2 + 2 * 256);
        assertThat(a.malloc(0, 0)).isZero();
        a.internals().checkInvariants();
    }

    @Test
    void freedNeighboursMergeButNotAcrossTheHeadOfAnotherUpstreamBlock() {
        SimulatedDevice dev = device(1L << 30);
        RmmPoolAllocator a = pool(dev, 4 * MiB, -1);
        long x = a.malloc(4 * MiB, 0); // the whole initial block
        long y = a.malloc(4 * MiB, 0); // the pool grows by max(4 MiB, 4 MiB): a second block, end to end
        assertThat(y)
                .as("the simulated device places the second block right after the first")
                .isEqualTo(x + 4 * MiB);
        assertThat(a.snapshot().segments()).hasSize(2);
        a.free(x);
        a.free(y);
        // 8 free bytes in a row, but in two blocks: a 6 MiB request grows the pool (by max(6, 8) = 8 MiB)
        long z = a.malloc(6 * MiB, 0);
        assertThat(z).isEqualTo(x + 8 * MiB);
        assertThat(reserved(a)).isEqualTo(16 * MiB);
        assertThat(a.snapshot().segments()).hasSize(3);
        // within one upstream block, neighbours merge: free the halves of a split block and take it whole
        a.free(z);
        long p = a.malloc(2 * MiB, 0);
        long q = a.malloc(2 * MiB, 0);
        assertThat(q).isEqualTo(p + 2 * MiB);
        a.free(p);
        a.free(q);
        assertThat(a.malloc(4 * MiB, 0)).isEqualTo(p);
        a.internals().checkInvariants();
    }

    @Test
    void withoutAMaximumThePoolGrowsByItsOwnSize() {
        RmmPoolAllocator a = pool(device(1L << 30), 4 * MiB, -1);
        a.malloc(4 * MiB, 0);
        a.malloc(1 * MiB, 0); // grows by max(1, 4) = 4 MiB
        assertThat(reserved(a)).isEqualTo(8 * MiB);
        a.malloc(3 * MiB, 0); // fits in what is left
        assertThat(reserved(a)).isEqualTo(8 * MiB);
        a.malloc(5 * MiB, 0); // grows by max(5, 8) = 8 MiB
        assertThat(reserved(a)).isEqualTo(16 * MiB);
        a.malloc(20 * MiB, 0); // grows by max(20, 16) = 20 MiB
        assertThat(reserved(a)).isEqualTo(36 * MiB);
        assertThat(a.stats().numDeviceAlloc()).isEqualTo(4);
    }

    @Test
    void withAMaximumThePoolGrowsHalfwayToItAndRefusesWhatItCannotHold() {
        RmmPoolAllocator a = pool(device(1L << 30), 4 * MiB, 20 * MiB);
        a.malloc(4 * MiB, 0);
        a.malloc(8 * MiB, 0); // remaining 16: grows by max(8, 8)
        assertThat(reserved(a)).isEqualTo(12 * MiB);
        a.malloc(2 * MiB, 0); // remaining 8: grows by max(2, 4) = 4
        assertThat(reserved(a)).isEqualTo(16 * MiB);
        a.malloc(2 * MiB, 0); // 2 MiB left over from that growth
        assertThat(reserved(a)).isEqualTo(16 * MiB);
        // remaining 4: a 5 MiB request is more than the maximum leaves, with the device far from full
        assertThatThrownBy(() -> a.malloc(5 * MiB, 0)).isInstanceOf(OutOfMemoryException.class);
        assertThat(reserved(a)).isEqualTo(16 * MiB);
        assertThat(a.stats().numOoms()).isEqualTo(1);
        a.malloc(4 * MiB, 0); // exactly what is left: max(4, 2)
        assertThat(reserved(a)).isEqualTo(20 * MiB);
        a.internals().checkInvariants();
    }

    @Test
    void aFailedGrowthIsRetriedAtHalfTheSizeButNotBelowTheRequest() {
        SimulatedDevice dev = device(48 * MiB);
        RmmPoolAllocator a = pool(dev, 32 * MiB, -1);
        a.malloc(32 * MiB, 0);
        a.malloc(8 * MiB, 0); // tries 32 MiB (16 free), then 16: taken
        assertThat(reserved(a)).isEqualTo(48 * MiB);
        assertThat(dev.callCount(DeviceOp.MALLOC)).isEqualTo(3);
        a.malloc(8 * MiB, 0); // what the 16 MiB block left
        long before = dev.callCount(DeviceOp.MALLOC);
        assertThatThrownBy(() -> a.malloc(4 * MiB, 0))
                .isInstanceOf(OutOfMemoryException.class)
                .satisfies(e -> assertThat(((OutOfMemoryException) e).report().reservedBytes())
                        .isEqualTo(48 * MiB));
        // tried 48, 24, 12, 6 and 4 MiB: halved while not below the request, the request itself last
        assertThat(dev.callCount(DeviceOp.MALLOC) - before).isEqualTo(5);
        a.internals().checkInvariants();
    }

    @Test
    void aStreamTakesFromItsOwnListThenAnothersThenMergesTheOthersThenGrows() {
        SimulatedDevice dev = device(1L << 30);
        long s1 = dev.createStream();
        long s2 = dev.createStream();
        long s3 = dev.createStream();
        RmmPoolAllocator a = pool(dev, 8 * MiB, -1);
        long x = a.malloc(4 * MiB, s1); // stream 1 has no list: taken from the default stream's, rest left there
        long y = a.malloc(4 * MiB, s2); // stream 2: the rest of the default stream's list
        assertThat(y).isEqualTo(x + 4 * MiB);
        assertThat(a.stats().extras()).containsEntry("num_stream_steals", 2L);
        a.free(x); // into stream 1's list
        a.free(y); // into stream 2's list: touching x, but another list
        long again = a.malloc(4 * MiB, s1); // its own list first
        assertThat(again).isEqualTo(x);
        a.free(again);
        // 8 MiB on stream 3: no list holds 8; stream 1's list merged in (4), then stream 2's: they coalesce to 8
        long z = a.malloc(8 * MiB, s3);
        assertThat(z).isEqualTo(x);
        assertThat(reserved(a)).as("no growth: the lists merged").isEqualTo(8 * MiB);
        assertThat(a.stats().extras()).containsEntry("num_stream_merges", 3L); // the default stream's (empty) too
        a.free(z);
        // the merged lists are gone: stream 1 finds nothing of its own, takes from stream 3's
        assertThat(a.malloc(2 * MiB, s1)).isEqualTo(x);
        a.internals().checkInvariants();
    }

    @Test
    void byDefaultTheInitialPoolIsHalfTheFreeMemoryInTheDefaultStreamsList() {
        SimulatedDevice dev = SimulatedDevice.builder()
                .capacity(1L << 30)
                .heldOutside(100 * MiB)
                .build();
        long free = dev.freeMemory();
        RmmPoolAllocator a = (RmmPoolAllocator) PolicySpec.parse("rmm-pool").create(dev);
        long expected = free / 2 / 256 * 256;
        assertThat(reserved(a)).isEqualTo(expected);
        List<SegmentInfo> segments = a.snapshot().segments();
        assertThat(segments).hasSize(1);
        assertThat(segments.getFirst().stream()).isZero();
        assertThat(segments.getFirst().blocks()).singleElement().satisfies(b -> {
            assertThat(b.state()).isEqualTo(BlockState.INACTIVE);
            assertThat(b.size()).isEqualTo(expected);
        });
        a.close();
        assertThat(dev.freeMemory()).isEqualTo(free);
        assertThat(a.stats().get(StatKind.RESERVED_BYTES).peak()).isEqualTo(expected);
        assertThat(a.stats().numDeviceFree()).isEqualTo(1);
    }

    @Test
    void theInvariantsHoldAfterCloseWithBlocksStillLiveOrWaitingAsEveryPolicysDo() {
        for (String name : new String[] {"rmm-pool", "pytorch", "stitch"}) {
            SimulatedDevice dev = device(256 * MiB);
            GpuAllocator a = PolicySpec.parse(name).create(dev);
            a.malloc(4 * MiB, 0); // still held at close
            long waiting = a.malloc(2 * MiB, 0);
            a.recordStream(waiting, 7);
            a.free(waiting); // waits on stream 7's event
            a.free(a.malloc(MiB, 0));
            a.internals().checkInvariants();
            a.close();
            a.internals().checkInvariants(); // threw for rmm-pool: live blocks outside any upstream block
            assertThat(a.stats().allocatedBytes()).as(name).isEqualTo(4 * MiB);
        }
    }

    @Test
    void anInitialPoolTheDeviceCannotHoldFailsAtConstruction() {
        assertThatThrownBy(() -> PolicySpec.parse("rmm-pool:initial=128MiB").create(device(64 * MiB)))
                .isInstanceOf(OutOfMemoryException.class);
        RmmPoolAllocator empty = pool(device(64 * MiB), 0, -1);
        assertThat(reserved(empty)).isZero();
        empty.malloc(1, 0); // grows by max(256, 0)
        assertThat(reserved(empty)).isEqualTo(256);
    }

    @Test
    void aMaximumAloneCapsTheDefaultInitialPool() {
        SimulatedDevice dev = device(1L << 30);
        RmmPoolAllocator capped =
                (RmmPoolAllocator) PolicySpec.parse("rmm-pool:max=64MiB").create(dev);
        assertThat(reserved(capped))
                .as("half the free memory is 512 MiB, above max")
                .isEqualTo(64 * MiB);
        assertThatThrownBy(() -> capped.malloc(65 * MiB, 0)).isInstanceOf(OutOfMemoryException.class);
        RmmPoolAllocator below =
                (RmmPoolAllocator) PolicySpec.parse("rmm-pool:max=768MiB").create(device(1L << 30));
        assertThat(reserved(below)).as("half the free memory is below max").isEqualTo(512 * MiB);
        assertThatThrownBy(() -> pool(device(1L << 30), 128 * MiB, 64 * MiB))
                .hasMessage("policy rmm-pool: initial 134217728 bytes exceeds max 67108864 bytes");
    }

    @Test
    void optionsAreCheckedWhenParsedNamingWhatIsWrong() {
        assertThat(PolicySpec.parse("rmm-pool:initial=1GiB,max=2GiB").label())
                .isEqualTo("rmm-pool:initial=1GiB,max=2GiB");
        assertThat(RmmPoolAllocator.PoolOptions.parse("max=2GiB, initial=256"))
                .isEqualTo(new RmmPoolAllocator.PoolOptions(256, 2L << 30));
        assertThat(RmmPoolAllocator.PoolOptions.parse("")).isEqualTo(new RmmPoolAllocator.PoolOptions(-1, -1));
        assertThatThrownBy(() -> PolicySpec.parse("rmm-pool:initial=100"))
                .hasMessage("policy rmm-pool: initial must be a multiple of 256 bytes, got 100");
        assertThatThrownBy(() -> PolicySpec.parse("rmm-pool:size=1GiB"))
                .hasMessage("policy rmm-pool: unknown option 'size' (known: initial, max)");
        assertThatThrownBy(() -> PolicySpec.parse("rmm-pool:initial"))
                .hasMessageContaining("option 'initial' needs a value");
        assertThatThrownBy(() -> PolicySpec.parse("rmm-pool:initial=2GiB,max=1GiB"))
                .hasMessageContaining("initial 2147483648 bytes exceeds max 1073741824 bytes");
        assertThatThrownBy(() -> PolicySpec.parse("rmm-pool:max=1GiB,max=2GiB"))
                .hasMessageContaining("max is given twice");
        assertThatThrownBy(() -> PolicySpec.parse("rmm-pool:max=0")).hasMessageContaining("max must be more than 0");
        assertThatThrownBy(() -> PolicySpec.parse("rmm-pool:initial=lots"))
                .hasMessageStartingWith("policy rmm-pool: initial: ");
    }

    @Test
    void badFreesAreRefusedAndChangeNothing() {
        RmmPoolAllocator a = pool(device(1L << 30), 4 * MiB, -1);
        long p = a.malloc(MiB, 0);
        assertThatThrownBy(() -> a.free(p + 256)).hasMessage("invalid device pointer: 0x" + Long.toHexString(p + 256));
        a.free(p);
        assertThatThrownBy(() -> a.free(p)).isInstanceOf(IllegalArgumentException.class);
        assertThatThrownBy(() -> a.malloc(-1, 0)).isInstanceOf(IllegalArgumentException.class);
        assertThatThrownBy(() -> a.malloc(Long.MAX_VALUE, 0)).isInstanceOf(OutOfMemoryException.class);
        a.internals().checkInvariants();
        assertThat(a.stats().get(StatKind.ALLOCATION).current()).isZero();
    }

    /**
     * A request no device holds (8 EiB less 4 KiB) grows nothing: the upstream refuses every try, halved down to the
     * request, so it is out of memory and the pool and the device are as they were (a granted 8 EiB block wrapped
     * past 2^63 in the snapshot).
     */
    @Test
    void aRequestNoDeviceHoldsIsOutOfMemoryAndLeavesThePoolAsItWas() {
        SimulatedDevice dev = device(1L << 30);
        RmmPoolAllocator a = pool(dev, 0, -1);
        assertThatThrownBy(() -> a.malloc(Long.MAX_VALUE - 4096, 0)).isInstanceOf(OutOfMemoryException.class);
        assertThat(reserved(a)).isZero();
        assertThat(dev.consumedBytes()).isZero();
        assertThat(a.snapshot().segments()).isEmpty();
        a.internals().checkInvariants();
    }

    @Test
    void historyRecordsUpstreamBlocksAllocsFreesAndOoms() {
        RmmPoolAllocator a = pool(device(64 * MiB), 0, 8 * MiB);
        a.internals().recordHistory(HistoryOptions.all());
        List<Frame> stack = List.of(new Frame("train.py", 7, "step"));
        a.internals().setContextSupplier(() -> stack);
        long p = a.malloc(3 * MiB, 5);
        a.free(p);
        assertThatThrownBy(() -> a.malloc(16 * MiB, 5)).isInstanceOf(OutOfMemoryException.class);
        List<TraceAction> actions = new ArrayList<>();
        for (TraceEntry e : a.snapshot().deviceTraces().getFirst()) {
            actions.add(e.action());
        }
        // 3 MiB: grows by max(3, 8 / 2) = 4 MiB
        assertThat(actions)
                .containsExactly(
                        TraceAction.SEGMENT_ALLOC,
                        TraceAction.ALLOC,
                        TraceAction.FREE_REQUESTED,
                        TraceAction.FREE_COMPLETED,
                        TraceAction.OOM);
        TraceEntry grown = a.snapshot().deviceTraces().getFirst().getFirst();
        assertThat(grown.size()).isEqualTo(4 * MiB);
        assertThat(grown.frames())
                .as("the growth carries the stack of the request that caused it")
                .isEqualTo(stack);
    }

    @Test
    void aSeededRandomRunKeepsEveryInvariantAndCountsWhatItHolds() {
        long seed = new SplittableRandom().nextLong();
        System.out.println("RmmPoolAllocatorTest seed=" + seed);
        SplittableRandom rnd = new SplittableRandom(seed);
        SimulatedDevice dev = device(256 * MiB);
        long[] streams = {0, dev.createStream(), dev.createStream()};
        RmmPoolAllocator a = pool(dev, rnd.nextBoolean() ? 0 : 16 * MiB, rnd.nextBoolean() ? -1 : 192 * MiB);
        List<long[]> live = new ArrayList<>(); // address, rounded size
        long allocated = 0;
        for (int step = 0; step < 3_000; step++) {
            if (live.isEmpty() || rnd.nextInt(100) < 55) {
                long size = 1 + rnd.nextLong(rnd.nextBoolean() ? 64 * 1024 : 24 * MiB);
                try {
                    long p = a.malloc(size, streams[rnd.nextInt(streams.length)]);
                    long rounded = (size + 255) / 256 * 256;
                    live.add(new long[] {p, rounded});
                    allocated += rounded;
                } catch (OutOfMemoryException full) {
                    // the pool is at its maximum or the device full: the state is unchanged
                }
            } else {
                long[] b = live.remove(rnd.nextInt(live.size()));
                a.free(b[0]);
                allocated -= b[1];
            }
            a.internals().checkInvariants();
            MemoryStats s = a.stats();
            assertThat(s.get(StatKind.ALLOCATED_BYTES).current())
                    .as("seed %d, step %d", seed, step)
                    .isEqualTo(allocated);
            // the device counts each cudaMalloc rounded up to its 2 MiB granularity
            long taken = 256 * MiB - dev.freeMemory();
            long pool = s.get(StatKind.RESERVED_BYTES).current();
            assertThat(pool)
                    .as("seed %d, step %d: the pool is what the device gave", seed, step)
                    .isLessThanOrEqualTo(taken)
                    .isGreaterThan(taken - 2 * MiB * s.numDeviceAlloc());
        }
        // live blocks never overlap
        live.sort((x, y) -> Long.compare(x[0], y[0]));
        for (int i = 1; i < live.size(); i++) {
            assertThat(live.get(i)[0])
                    .as("seed %d", seed)
                    .isGreaterThanOrEqualTo(live.get(i - 1)[0] + live.get(i - 1)[1]);
        }
        assertThat(blocks(a).values()).contains(BlockState.ACTIVE_ALLOCATED);
    }

    /**
     * A seeded random run over three streams with what the run above leaves out: stream uses recorded on other streams
     * (blocks that wait on held events), events completed a stream at a time, {@code emptyCache}, and upstream
     * {@code cudaMalloc}s that fail (out of memory, or another driver error, which RMM takes for no memory). After
     * every step the invariants hold, the stats match what the run holds, no two held blocks overlap, and the pool
     * passes its maximum by less than the 256 bytes RMM's rounding of the headroom allows; at close the device gets
     * everything back.
     */
    @Test
    void aSeededRandomRunWithStreamUsesHeldEventsAndFailedGrowthsKeepsEveryInvariant() {
        long seed = new SplittableRandom().nextLong();
        System.out.println("RmmPoolAllocatorTest streams seed=" + seed);
        SplittableRandom rnd = new SplittableRandom(seed);
        SimulatedDevice dev =
                SimulatedDevice.builder().capacity(256 * MiB).holdEvents(true).build();
        long[] streams = {0, dev.createStream(), dev.createStream()};
        // sizes in whole MiB and an initial pool in whole 2 MiB granules make upstream blocks that lie end to end,
        // which must not merge
        long max = rnd.nextBoolean() ? -1 : (64 + rnd.nextInt(128)) * MiB + (rnd.nextBoolean() ? 0 : 256);
        RmmPoolAllocator a = pool(dev, 2 * MiB * rnd.nextInt(16), max);
        java.util.TreeMap<Long, Long> live = new java.util.TreeMap<>(); // address to rounded size
        long allocated = 0;
        for (int step = 0; step < 4_000; step++) {
            String at = "seed " + seed + ", step " + step;
            int op = rnd.nextInt(100);
            if (live.isEmpty() || op < 50) {
                long size = switch (rnd.nextInt(3)) {
                    case 0 -> 1 + rnd.nextLong(64 * 1024);
                    case 1 -> MiB * (1 + rnd.nextInt(8));
                    default -> 1 + rnd.nextLong(16 * MiB);
                };
                long stream = streams[rnd.nextInt(streams.length)];
                try {
                    long p = a.malloc(size, stream);
                    long rounded = (size + 255) / 256 * 256;
                    Map.Entry<Long, Long> below = live.floorEntry(p);
                    Map.Entry<Long, Long> above = live.ceilingEntry(p);
                    assertThat(below == null || below.getKey() + below.getValue() <= p)
                            .as("%s: 0x%x overlaps the block below", at, p)
                            .isTrue();
                    assertThat(above == null || p + rounded <= above.getKey())
                            .as("%s: 0x%x overlaps the block above", at, p)
                            .isTrue();
                    live.put(p, rounded);
                    allocated += rounded;
                    if (rnd.nextInt(4) == 0) {
                        a.recordStream(p, streams[rnd.nextInt(streams.length)]);
                    }
                } catch (OutOfMemoryException full) {
                    // the pool is at its maximum or the device full (or refused): the state is unchanged
                }
            } else if (op < 85) {
                long p = live.keySet().stream()
                        .skip(rnd.nextInt(live.size()))
                        .findFirst()
                        .orElseThrow();
                a.free(p);
                allocated -= live.remove(p);
            } else if (op < 93) {
                dev.completeNextEvent(streams[rnd.nextInt(streams.length)]);
            } else if (op < 95) {
                a.emptyCache();
            } else {
                dev.failNth(
                        DeviceOp.MALLOC,
                        1 + rnd.nextInt(3),
                        rnd.nextBoolean() ? DeviceError.CUDA_ERROR_OUT_OF_MEMORY : DeviceError.CUDA_ERROR_UNKNOWN);
            }
            a.internals().checkInvariants();
            MemoryStats s = a.stats();
            assertThat(s.get(StatKind.ALLOCATED_BYTES).current()).as(at).isEqualTo(allocated);
            assertThat(s.get(StatKind.ALLOCATION).current()).as(at).isEqualTo(live.size());
            long pool = s.get(StatKind.RESERVED_BYTES).current();
            assertThat(pool).as(at).isEqualTo(s.get(StatKind.RESERVED_BYTES).peak());
            if (max >= 0) {
                assertThat(pool)
                        .as("%s: pool within the maximum's rounding", at)
                        .isLessThan(max + 256);
            }
        }
        a.close();
        assertThat(dev.consumedBytes()).as("seed %d", seed).isZero();
    }

    @Test
    void anInitialPoolAtExactlyTheMaximumIsAllowedAndHalfTheFreeMemoryAtTheMaximumIsKept() {
        RmmPoolAllocator full = pool(device(1L << 30), 64 * MiB, 64 * MiB);
        assertThat(reserved(full)).isEqualTo(64 * MiB);
        // half of 1 GiB free is exactly max: the default stands, no cap needed
        RmmPoolAllocator half =
                (RmmPoolAllocator) PolicySpec.parse("rmm-pool:max=512MiB").create(device(1L << 30));
        assertThat(reserved(half)).isEqualTo(512 * MiB);
        assertThatThrownBy(() -> half.malloc(512 * MiB + 1, 0)).isInstanceOf(OutOfMemoryException.class);
    }

    @Test
    void aClosedPoolRefusesWorkGaveItsBlocksBackAndSaysSoInItsHistory() {
        SimulatedDevice dev = device(1L << 30);
        RmmPoolAllocator a = pool(dev, 4 * MiB, -1);
        a.internals().recordHistory(HistoryOptions.all());
        long p = a.malloc(MiB, 0);
        a.malloc(8 * MiB, 0); // a second upstream block
        a.close();
        a.close(); // idempotent
        assertThat(dev.consumedBytes()).isZero();
        assertThat(a.snapshot().segments()).isEmpty();
        assertThat(a.snapshot().deviceTraces().getFirst())
                .filteredOn(e -> e.action() == TraceAction.SEGMENT_FREE)
                .extracting(TraceEntry::size)
                .containsExactlyInAnyOrder(4 * MiB, 8 * MiB);
        assertThat(a.stats().numDeviceFree()).isEqualTo(2);
        assertThat(a.stats().get(StatKind.RESERVED_BYTES).current()).isZero();
        assertThatThrownBy(() -> a.malloc(MiB, 0)).isInstanceOf(IllegalStateException.class);
        assertThatThrownBy(() -> a.free(p)).isInstanceOf(IllegalStateException.class);
        assertThatThrownBy(a::emptyCache).isInstanceOf(IllegalStateException.class);
        // a stream use is refused too, as every policy's is (PolicyContractTest): p's memory went back with the pool
        assertThatThrownBy(() -> a.recordStream(p, 7))
                .isInstanceOf(IllegalStateException.class)
                .hasMessageContaining("closed");
    }

    @Test
    void blocksUsedOnOtherStreamsWaitUntilMallocSeesThemDoneOrEmptyCacheSynchronises() {
        SimulatedDevice dev =
                SimulatedDevice.builder().capacity(1L << 30).holdEvents(true).build();
        long side = dev.createStream();
        RmmPoolAllocator a = pool(dev, 16 * MiB, -1);
        long p = a.malloc(2 * MiB, 0);
        long q = a.malloc(2 * MiB, 0);
        a.recordStream(p, side);
        a.recordStream(p, side); // once is enough
        a.recordStream(q, 0); // its own stream: nothing to wait for
        a.recordStream(q, side);
        a.free(p);
        a.free(q);
        assertThat(dev.callCount(DeviceOp.RECORD_EVENT)).isEqualTo(2);
        assertThat(blocks(a))
                .containsEntry(p, BlockState.ACTIVE_PENDING_FREE)
                .containsEntry(q, BlockState.ACTIVE_PENDING_FREE);
        // both events complete: one malloc's poll returns both blocks, and destroys both events
        dev.completeEvents(side);
        long r = a.malloc(4 * MiB, 0);
        assertThat(r).as("p and q merged back into one 4 MiB block").isEqualTo(p);
        assertThat(dev.callCount(DeviceOp.DESTROY_EVENT)).isEqualTo(2);
        assertThat(dev.callCount(DeviceOp.SYNCHRONIZE_EVENT)).isZero();
        // emptyCache synchronises what still waits, and the pool stays whole
        a.recordStream(r, side);
        a.free(r);
        assertThat(blocks(a)).containsEntry(r, BlockState.ACTIVE_PENDING_FREE);
        a.emptyCache();
        assertThat(dev.callCount(DeviceOp.SYNCHRONIZE_EVENT)).isEqualTo(1);
        assertThat(blocks(a)).containsEntry(r, BlockState.INACTIVE);
        assertThat(reserved(a)).isEqualTo(16 * MiB);
        a.internals().checkInvariants();
    }

    @Test
    void anOutOfMemoryReportNamesEachStreamsLargestFreeBlock() {
        SimulatedDevice dev = device(32 * MiB);
        long s1 = dev.createStream();
        RmmPoolAllocator a = pool(dev, 16 * MiB, 16 * MiB);
        long x = a.malloc(3 * MiB, s1);
        a.malloc(MiB, s1);
        long y = a.malloc(5 * MiB, 0);
        a.malloc(MiB, 0);
        a.free(x); // stream 1's list: 3 MiB
        a.free(y); // the default stream's list: 5 MiB, and the 6 MiB left of the initial block beside it
        OutOfMemoryException e = catchOom(() -> a.malloc(15 * MiB, s1));
        assertThat(e.report().largestFreeBlocks())
                .as("the lists merged into stream 1's before the growth failed: one list, the largest block 6 MiB")
                .containsExactly(new OomReport.LargestFree(Pool.LARGE, s1, 6 * MiB));
        assertThat(e.report().allocatedBytes()).isEqualTo(2 * MiB);
        assertThat(e.report().reservedBytes()).isEqualTo(16 * MiB);
        assertThat(e.report().roundedSize()).isEqualTo(15 * MiB);
    }

    private static OutOfMemoryException catchOom(Runnable r) {
        try {
            r.run();
        } catch (OutOfMemoryException e) {
            return e;
        }
        throw new AssertionError("no out-of-memory error");
    }

    @Test
    void theStatsCountWhatWasHandedOutAndFreedInTotal() {
        RmmPoolAllocator a = pool(device(1L << 30), 0, -1);
        long p = a.malloc(1000, 0); // 1,024 bytes
        long q = a.malloc(3 * MiB, 0);
        a.free(p);
        a.malloc(100, 0); // 256 bytes
        a.free(q);
        MemoryStats.Stat bytes = a.stats().get(StatKind.ALLOCATED_BYTES);
        assertThat(bytes.current()).isEqualTo(256);
        assertThat(bytes.peak()).isEqualTo(1024 + 3 * MiB);
        assertThat(bytes.allocated()).isEqualTo(1024 + 3 * MiB + 256);
        assertThat(bytes.freed()).isEqualTo(1024 + 3 * MiB);
        MemoryStats.Stat count = a.stats().get(StatKind.ALLOCATION);
        assertThat(count.current()).isEqualTo(1);
        assertThat(count.peak()).isEqualTo(2);
        assertThat(count.allocated()).isEqualTo(3);
        assertThat(count.freed()).isEqualTo(2);
    }

    @Test
    void aFreeRecordsTheStackAtTheFreeWhereHistoryTakesOne() {
        RmmPoolAllocator a = pool(device(1L << 30), 4 * MiB, -1);
        a.internals().recordHistory(HistoryOptions.all());
        AtomicReference<List<Frame>> now = new AtomicReference<>(List.of(new Frame("model.py", 1, "forward")));
        a.internals().setContextSupplier(now::get);
        long p = a.malloc(MiB, 0);
        now.set(List.of(new Frame("train.py", 9, "backward")));
        a.free(p);
        TraceEntry freed = a.snapshot().deviceTraces().getFirst().stream()
                .filter(e -> e.action() == TraceAction.FREE_REQUESTED)
                .findFirst()
                .orElseThrow();
        assertThat(freed.frames()).isEqualTo(now.get());
    }

    @Test
    void aRequestThatFindsNoMemoryWaitsForTheBlocksOtherStreamsStillUseAndTriesOnce() {
        SimulatedDevice dev =
                SimulatedDevice.builder().capacity(1L << 30).holdEvents(true).build();
        long side = dev.createStream();
        RmmPoolAllocator a = pool(dev, 4 * MiB, 4 * MiB);
        long p = a.malloc(4 * MiB, 0);
        a.recordStream(p, side);
        a.free(p);
        // the pool is at its maximum and its only block waits: synchronise, then serve it
        assertThat(a.malloc(4 * MiB, 0)).isEqualTo(p);
        assertThat(dev.callCount(DeviceOp.SYNCHRONIZE_EVENT)).isEqualTo(1);
        assertThat(a.stats().numAllocRetries()).isEqualTo(1);
        assertThat(a.stats().numOoms()).isZero();
    }

    @Test
    void theSnapshotShowsRequestsAndStacksOfHeldBlocksOnly() {
        SimulatedDevice dev =
                SimulatedDevice.builder().capacity(1L << 30).holdEvents(true).build();
        long side = dev.createStream();
        RmmPoolAllocator a = pool(dev, 8 * MiB, -1);
        a.internals().recordHistory(HistoryOptions.all());
        List<Frame> stack = List.of(new Frame("model.py", 3, "layer"));
        a.internals().setContextSupplier(() -> stack);
        long held = a.malloc(1000, 0);
        long waits = a.malloc(2000, 0);
        long freed = a.malloc(3000, 0);
        a.recordStream(waits, side);
        a.free(waits);
        a.free(freed);
        Map<Long, BlockInfo> byAddress = new HashMap<>();
        for (BlockInfo b : a.snapshot().segments().getFirst().blocks()) {
            byAddress.put(b.address(), b);
        }
        assertThat(byAddress.get(held).requestedSize()).isEqualTo(1000);
        assertThat(byAddress.get(held).frames()).isEqualTo(stack);
        assertThat(byAddress.get(waits).state()).isEqualTo(BlockState.ACTIVE_PENDING_FREE);
        assertThat(byAddress.get(waits).requestedSize()).isEqualTo(2000);
        assertThat(byAddress.get(freed).state()).isEqualTo(BlockState.INACTIVE);
        assertThat(byAddress.get(freed).requestedSize()).isZero();
        assertThat(byAddress.get(freed).frames()).isEmpty();
    }
}
