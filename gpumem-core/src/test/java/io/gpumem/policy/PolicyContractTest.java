package io.gpumem.policy;

import static io.gpumem.testing.TestSizes.MiB;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.gpumem.alloc.GpuAllocator;
import io.gpumem.device.Device;
import io.gpumem.history.Frame;
import io.gpumem.history.HistoryOptions;
import io.gpumem.history.MemorySnapshot;
import io.gpumem.history.TraceAction;
import io.gpumem.history.TraceEntry;
import io.gpumem.oom.OutOfMemoryException;
import io.gpumem.stats.MemoryStats;
import io.gpumem.stats.StatKind;
import io.gpumem.stats.StatType;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import org.junit.jupiter.api.Test;

/**
 * The contract of the non-PyTorch policies ({@link StitchAllocator}, {@link PlannedAllocator}) on any device: run
 * here on the simulated device and, by a subclass in gpumem-cuda, on {@code CudaDevice} over the fake driver (whose
 * pages are memfd mappings, so data written through one mapping must survive stitching).
 */
public abstract class PolicyContractTest {

    /** A device of {@code capacity} bytes, 2 MiB granularity, with events held until {@link #completeEvents}. */
    protected abstract Device newDevice(long capacity, boolean holdEvents);

    protected abstract void completeEvents(Device device);

    /** Whether the device keeps data (copies to and from device memory are checked). */
    protected abstract boolean keepsData();

    @Test
    void stitchServesARequestFromScatteredFreePages() {
        Device d = newDevice(20 * MiB, false);
        StitchAllocator a = new StitchAllocator(d);
        long[] blocks = new long[10];
        for (int i = 0; i < 10; i++) {
            blocks[i] = a.malloc(2 * MiB, 0);
        }
        for (int i = 0; i < 10; i += 2) {
            a.free(blocks[i]);
        }
        // Five free pages, none adjacent: only stitching can give a 10 MiB block at 20 MiB capacity.
        long big = a.malloc(10 * MiB, 0);
        a.internals().checkInvariants();
        assertThat(big).isNotZero();
        assertThat(a.stats().extra("num_stitched_pages")).isEqualTo(5L);
        assertThat(a.stats().reservedBytes()).isEqualTo(20 * MiB);
        assertThat(a.stats().allocatedBytes()).isEqualTo(20 * MiB);
        assertThat(a.stats().reservedBytes()).isEqualTo(20 * MiB);
        var snap = a.snapshot();
        assertThat(snap.segments().stream().mapToLong(s -> s.totalSize()).sum()).isEqualTo(20 * MiB);
        assertThat(snap.segments().stream().mapToLong(s -> s.allocatedSize()).sum())
                .isEqualTo(20 * MiB);
        assertThat(a.malloc(0, 0)).isZero();
        a.free(0);
        assertThatThrownBy(() -> a.free(12345)).isInstanceOf(IllegalArgumentException.class);
        assertThatThrownBy(() -> a.malloc(2 * MiB, 0)).isInstanceOf(OutOfMemoryException.class);
        assertThat(a.stats().numOoms()).isEqualTo(1L);
        a.free(big);
        a.emptyCache();
        a.internals().checkInvariants();
        assertThat(a.stats().reservedBytes()).isEqualTo(5 * 2 * MiB);
    }

    @Test
    void stitchRecordsHistoryAndStacksLikeTheExactAllocator() {
        Device d = newDevice(8 * MiB, false);
        StitchAllocator a = new StitchAllocator(d);
        long[] now = {100};
        List<Frame> stack = List.of(new Frame("model.py", 7, "forward"));
        a.internals().recordHistory(HistoryOptions.all());
        a.internals().setContextSupplier(() -> stack);
        a.internals().setClock(() -> now[0]++);
        long x = a.malloc(3 * MiB, 0);
        long y = a.malloc(1000, 0);
        a.free(x);
        assertThatThrownBy(() -> a.malloc(16 * MiB, 0)).isInstanceOf(OutOfMemoryException.class);
        a.emptyCache();
        MemorySnapshot snap = a.snapshot();
        List<TraceEntry> trace = snap.deviceTraces().get(0);
        assertThat(trace)
                .extracting(TraceEntry::action)
                .containsSubsequence(
                        TraceAction.SEGMENT_MAP,
                        TraceAction.ALLOC,
                        TraceAction.ALLOC,
                        TraceAction.FREE_REQUESTED,
                        TraceAction.FREE_COMPLETED,
                        TraceAction.OOM,
                        TraceAction.SEGMENT_UNMAP);
        assertThat(trace).allMatch(e -> stack.equals(e.frames()), "every entry carries the request's stack");
        assertThat(trace).extracting(TraceEntry::timeUs).isSorted();
        TraceEntry alloc = trace.stream()
                .filter(e -> e.action() == TraceAction.ALLOC)
                .toList()
                .get(1);
        assertThat(alloc.addr()).isEqualTo(y);
        assertThat(alloc.size()).isEqualTo(1000);
        var live = snap.segments().stream()
                .flatMap(s -> s.blocks().stream())
                .filter(b -> b.state() == io.gpumem.history.BlockState.ACTIVE_ALLOCATED)
                .toList();
        assertThat(live).singleElement().satisfies(b -> {
            assertThat(b.address()).isEqualTo(y);
            assertThat(b.requestedSize()).isEqualTo(1000);
            assertThat(b.frames()).isEqualTo(stack);
        });
        a.internals().recordHistory(HistoryOptions.off());
        a.free(y);
        assertThat(a.snapshot().deviceTraces().get(0)).isEmpty();
        a.internals().checkInvariants();
    }

    @Test
    void stitchRandomisedWithStreamsEventsAndOoms() {
        long seed = System.nanoTime();
        System.out.println(getClass().getSimpleName() + ".stitchRandomisedWithStreamsEventsAndOoms seed " + seed);
        randomRun(seed, false);
    }

    @Test
    void plannedRandomisedWithStreamsEventsAndOoms() {
        long seed = System.nanoTime();
        System.out.println(getClass().getSimpleName() + ".plannedRandomisedWithStreamsEventsAndOoms seed " + seed);
        randomRun(seed, true);
    }

    private void randomRun(long seed, boolean planned) {
        Random r = new Random(seed);
        long capacity = (24 + r.nextInt(40)) * MiB;
        Device d = newDevice(capacity, true);
        long page = d.allocationGranularity();
        long[] streams = {0, d.createStream(), d.createStream()};
        GpuAllocator a;
        PlannedAllocator p = null;
        if (planned) {
            p = PlannedAllocator.profiling(d, 1);
            a = p;
        } else {
            a = new StitchAllocator(d);
        }
        record Live(long ptr, long size, long tag) {}
        List<Live> live = new ArrayList<>();
        try (Arena host = Arena.ofConfined()) {
            MemorySegment buf = host.allocate(8);
            for (int op = 0; op < 800; op++) {
                int kind = r.nextInt(100);
                if (planned && op % 100 == 99) {
                    a.internals().stepBoundary();
                }
                if (kind < 50 || live.isEmpty()) {
                    long size =
                            r.nextInt(4) == 0 ? 1 + r.nextInt(1 << 20) : (1 + r.nextInt(6)) * MiB + r.nextInt(1 << 20);
                    try {
                        long ptr = a.malloc(size, streams[r.nextInt(3)]);
                        long tag = r.nextLong();
                        if (keepsData()) {
                            buf.set(ValueLayout.JAVA_LONG, 0, tag);
                            d.copyToDevice(ptr, buf, 8);
                            d.copyToDevice(ptr + (size - 8 > 0 ? (size - 8) & ~7L : 0), buf, Math.min(8, size));
                        }
                        live.add(new Live(ptr, size, tag));
                    } catch (OutOfMemoryException e) {
                        // Fails only when free physical memory, in whole pages, is short of what the block needs.
                        long rounded = StitchAllocator.roundSize(size);
                        long need = (rounded + page - 1) / page + 1;
                        long have = d.freeMemory() / page + stealable(a);
                        assertThat(have)
                                .as(
                                        "seed %d op %d: %d pages free or stealable, request needs up to %d",
                                        seed, op, have, need)
                                .isLessThan(need);
                    }
                } else if (kind < 90) {
                    Live l = live.remove(r.nextInt(live.size()));
                    if (keepsData()) {
                        d.copyToHost(buf, l.ptr, 8);
                        assertThat(buf.get(ValueLayout.JAVA_LONG, 0))
                                .as("seed %d op %d: block data", seed, op)
                                .isEqualTo(l.tag);
                    }
                    if (r.nextInt(4) == 0) {
                        a.recordStream(l.ptr, streams[r.nextInt(3)]);
                    }
                    a.free(l.ptr);
                } else if (kind < 97) {
                    completeEvents(d);
                } else {
                    a.emptyCache();
                }
                a.internals().checkInvariants();
                MemoryStats s = a.stats();
                assertThat(s.allocatedBytes()).isLessThanOrEqualTo(s.reservedBytes());
                assertThat(s.reservedBytes()).isLessThanOrEqualTo(capacity);
            }
            for (Live l : live) {
                a.free(l.ptr);
            }
            completeEvents(d);
            a.emptyCache();
            a.internals().checkInvariants();
            assertThat(a.stats().allocatedBytes()).isZero();
            assertThat(a.stats().reservedBytes()).isZero();
        }
    }

    private static long stealable(GpuAllocator a) {
        StitchAllocator s = a instanceof PlannedAllocator p ? p.memory() : (StitchAllocator) a;
        return s.stealablePages();
    }

    /**
     * Closing a policy gives the device every page it caches and keeps the blocks the user still holds, as the exact
     * allocator's close does ({@link GpuAllocator#close}); later calls are refused.
     */
    @Test
    void closeGivesTheCacheBackAndRetiresTheAllocator() {
        for (boolean planned : new boolean[] {false, true}) {
            Device d = newDevice(64 * MiB, false);
            GpuAllocator a =
                    planned ? new PlannedAllocator(d, new long[] {4 * MiB}, new long[] {0}) : new StitchAllocator(d);
            long kept = a.malloc(4 * MiB, 0);
            a.free(a.malloc(6 * MiB, 0));
            a.free(a.malloc(MiB, 0));
            assertThat(d.freeMemory()).isLessThan(60 * MiB);
            a.close();
            assertThat(d.freeMemory()).as("planned: %s", planned).isEqualTo(60 * MiB);
            assertThat(a.stats().reservedBytes()).as("planned: %s", planned).isEqualTo(4 * MiB);
            assertThatThrownBy(() -> a.malloc(MiB, 0))
                    .as("planned: %s", planned)
                    .isInstanceOf(IllegalStateException.class)
                    .hasMessageContaining("closed");
            // a free or stream use after close is refused as the exact allocator's are: a block freed now would stay
            // cached with nothing left to give it back
            assertThatThrownBy(() -> a.free(kept))
                    .as("planned: %s", planned)
                    .isInstanceOf(IllegalStateException.class)
                    .hasMessageContaining("closed");
            assertThatThrownBy(() -> a.recordStream(kept, 7))
                    .as("planned: %s", planned)
                    .isInstanceOf(IllegalStateException.class)
                    .hasMessageContaining("closed");
            assertThat(a.stats().allocatedBytes()).as("planned: %s", planned).isEqualTo(4 * MiB);
            a.close(); // idempotent
            assertThat(kept).isNotZero();
        }
    }

    /**
     * A request that maps pages and then runs out of physical memory leaves those pages mapped (cached): the peak of
     * reserved bytes must count them, as it counts every mapping (it stayed below the bytes reserved now). The planned
     * policy's request at its planned offset does the same through its fixed arena.
     */
    @Test
    void aRequestThatRunsOutPartWayLeavesThePeakAtOrAboveWhatIsReserved() {
        for (boolean planned : new boolean[] {false, true}) {
            Device d = newDevice(32 * MiB, false);
            GpuAllocator a =
                    planned ? new PlannedAllocator(d, new long[] {40 * MiB}, new long[] {0}) : new StitchAllocator(d);
            assertThatThrownBy(() -> a.malloc(40 * MiB, 0)).isInstanceOf(OutOfMemoryException.class);
            MemoryStats s = a.stats();
            assertThat(s.reservedBytes()).as("planned: %s", planned).isPositive();
            assertThat(s.get(StatKind.RESERVED_BYTES, StatType.ALL).peak())
                    .as("planned: %s", planned)
                    .isGreaterThanOrEqualTo(s.reservedBytes());
            a.internals().checkInvariants();
        }
    }

    /** A planned request after close is refused as the fallback's is, before the plan moves on (it was served). */
    @Test
    void aPlannedRequestAfterCloseIsRefused() {
        Device d = newDevice(64 * MiB, false);
        PlannedAllocator a = new PlannedAllocator(d, new long[] {4 * MiB}, new long[] {0});
        a.close();
        long free = d.freeMemory();
        assertThatThrownBy(() -> a.malloc(4 * MiB, 0))
                .isInstanceOf(IllegalStateException.class)
                .hasMessageContaining("closed");
        assertThat(d.freeMemory()).isEqualTo(free);
        assertThat(a.stats().allocatedBytes()).isZero();
    }

    @Test
    void plannedServesAtPlannedOffsetsAndFallsBackOtherwise() {
        Device d = newDevice(64 * MiB, false);
        // Three requests: a and b overlap, c reuses a's place after a is freed.
        PlannedAllocator a =
                new PlannedAllocator(d, new long[] {4 * MiB, 2 * MiB, 4 * MiB}, new long[] {0, 4 * MiB, 0});
        long x = a.malloc(4 * MiB, 0);
        long y = a.malloc(2 * MiB, 0);
        assertThat(y - x).isEqualTo(4 * MiB);
        a.free(x);
        long z = a.malloc(4 * MiB, 0);
        assertThat(z).isEqualTo(x);
        long w = a.malloc(1 * MiB, 0); // beyond the plan: the fallback serves it
        a.internals().checkInvariants();
        assertThat(a.stats().extra("num_planned_requests")).isEqualTo(3L);
        assertThat(a.stats().extra("num_fallback_requests")).isEqualTo(1L);
        a.free(y);
        a.free(z);
        a.free(w);
        a.internals().checkInvariants();
    }

    @Test
    void aPlannedRequestThatRunsOutOfMemoryTakesNoPosition() {
        Device d = newDevice(64 * MiB, false);
        PlannedAllocator a =
                new PlannedAllocator(d, new long[] {4 * MiB, 2 * MiB, 4 * MiB}, new long[] {0, 4 * MiB, 8 * MiB});
        long x = a.malloc(4 * MiB, 0);
        assertThatThrownBy(() -> a.malloc(1L << 40, 0)).isInstanceOf(OutOfMemoryException.class);
        // the failed request was no request of the plan: the next two still meet their planned places
        long y = a.malloc(2 * MiB, 0);
        long z = a.malloc(4 * MiB, 0);
        assertThat(y - x).isEqualTo(4 * MiB);
        assertThat(z - x).isEqualTo(8 * MiB);
        assertThat(a.stats().extra("num_planned_requests")).isEqualTo(3L);
        assertThat(a.stats().extra("num_fallback_requests")).isZero();
        a.internals().checkInvariants();
    }

    /**
     * A planned range whose pages the device cannot give falls back, as any request the plan cannot serve does: the
     * fallback's partly used small page still holds it (the stitch policy alone serves this stream), so the plan
     * must not turn it into an out-of-memory error.
     */
    @Test
    void aPlannedRequestWhosePagesCannotBeHadFallsBack() {
        Device d = newDevice(4 * MiB, false);
        // positions 0 and 1 unplanned (the fallback maps both pages), position 2 planned in the region
        PlannedAllocator a = new PlannedAllocator(d, new long[] {0, 0, 512}, new long[] {0, 0, 0});
        long small = a.malloc(512, 0);
        long large = a.malloc(2 * MiB, 0);
        long third = a.malloc(512, 0);
        assertThat(third).isNotZero().isNotIn(small, large);
        assertThat(a.stats().numOoms()).isZero();
        assertThat(a.stats().extra("num_planned_requests")).isZero();
        assertThat(a.stats().extra("num_fallback_requests")).isEqualTo(1L);
        a.internals().checkInvariants();
        a.free(third);
        a.free(large);
        a.free(small);
        a.internals().checkInvariants();
    }

    /** A given plan's entries are checked (an end past 2^63 is refused, not wrapped) and its sizes rounded. */
    @Test
    void aGivenPlanIsCheckedAndItsSizesRoundedAsRequestsAre() {
        Device d = newDevice(64 * MiB, false);
        assertThatThrownBy(() -> new PlannedAllocator(d, new long[] {0, 512}, new long[] {0, Long.MAX_VALUE & -512}))
                .isInstanceOf(IllegalArgumentException.class)
                .hasMessageContaining("plan entry 1")
                .hasMessageContaining("past 2^63");
        assertThatThrownBy(() -> new PlannedAllocator(d, new long[] {-512}, new long[] {0}))
                .isInstanceOf(IllegalArgumentException.class)
                .hasMessageContaining("plan entry 0: negative size");
        // an offset of a PiB: its region's page arrays would grow to it at the first request (gigabytes of heap)
        assertThatThrownBy(() -> new PlannedAllocator(d, new long[] {0, 512}, new long[] {0, 1L << 50}))
                .isInstanceOf(IllegalArgumentException.class)
                .hasMessageContaining("plan entry 1: offset 1125899906842624 + size 512 ends past")
                .hasMessageContaining("twice the device's memory");
        // sizes as requested: 1000 and 3000 bytes are served as the 1024 and 3072 bytes their requests round to
        PlannedAllocator a = new PlannedAllocator(d, new long[] {1000, 3000}, new long[] {0, 1024});
        long x = a.malloc(1000, 0);
        long y = a.malloc(3000, 0);
        assertThat(y - x).isEqualTo(1024);
        assertThat(a.stats().extra("num_planned_requests")).isEqualTo(2L);
        assertThat(a.stats().extra("num_fallback_requests")).isZero();
        a.internals().checkInvariants();
    }

    @Test
    void plannedProfilesAnIterationThenServesAndAdapts() {
        Device d = newDevice(256 * MiB, false);
        PlannedAllocator a = PlannedAllocator.profiling(d, 1);
        long[] sizes = {8 * MiB, 3 * MiB, 5 * MiB, 8 * MiB};
        iteration(a, sizes);
        a.internals().stepBoundary();
        assertThat(a.stats().extra("num_plans")).isEqualTo(1L);
        iteration(a, sizes);
        assertThat(a.stats().extra("num_planned_requests")).isEqualTo(4L);
        assertThat(a.stats().extra("num_fallback_requests")).isZero();
        a.internals().stepBoundary();
        long[] changed = {8 * MiB, 6 * MiB, 5 * MiB, 8 * MiB}; // a changed shape: one fallback, then a new plan
        iteration(a, changed);
        assertThat(a.stats().extra("num_fallback_requests")).isEqualTo(1L);
        a.internals().stepBoundary();
        iteration(a, changed); // recorded
        a.internals().stepBoundary();
        assertThat(a.stats().extra("num_plans")).isEqualTo(2L);
        long before = a.stats().extra("num_planned_requests");
        iteration(a, changed);
        assertThat(a.stats().extra("num_planned_requests")).isEqualTo(before + 4);
        a.internals().checkInvariants();
    }

    /** a = s0; b = s1; free a; c = s2; d = s3; free b, c, d. */
    private static void iteration(PlannedAllocator a, long[] s) {
        long p0 = a.malloc(s[0], 0);
        long p1 = a.malloc(s[1], 0);
        a.free(p0);
        long p2 = a.malloc(s[2], 0);
        long p3 = a.malloc(s[3], 0);
        a.free(p1);
        a.free(p2);
        a.free(p3);
        a.internals().checkInvariants();
    }
}
