package io.gpumem.alloc;

import static io.gpumem.testing.TestSizes.MiB;
import static org.assertj.core.api.Assertions.assertThat;

import io.gpumem.device.DeviceOp;
import io.gpumem.device.SimulatedDevice;
import io.gpumem.history.BlockInfo;
import io.gpumem.history.BlockState;
import io.gpumem.history.HistoryOptions;
import io.gpumem.history.TraceAction;
import io.gpumem.history.TraceEntry;
import java.util.List;
import org.junit.jupiter.api.Test;

/** record_stream, per-stream event queues and their completion points (allocator.md §4.1), with held-back events. */
class StreamEventsTest {

    @Test
    void pendingBlockIsActiveUntilAMallocObservesItsEvents() {
        SimulatedDevice dev =
                SimulatedDevice.builder().capacity(1L << 30).holdEvents(true).build();
        CachingAllocator a = new CachingAllocator(dev);
        a.recordHistory(HistoryOptions.all());
        long s1 = dev.createStream();
        long p = a.malloc(3 * MiB);
        a.recordStream(p, s1);
        a.free(p);
        assertThat(a.internals().pendingFreeBlocks()).isEqualTo(1);
        assertThat(a.stats().toPyTorchMap().get("allocated_bytes.all.current")).isZero();
        assertThat(a.stats().toPyTorchMap().get("active_bytes.all.current")).isEqualTo(3 * MiB);
        List<BlockInfo> blocks = a.snapshot().segments().getFirst().blocks();
        assertThat(blocks.getFirst().state()).isEqualTo(BlockState.ACTIVE_PENDING_FREE);
        a.internals().checkInvariants();

        long q = a.malloc(3 * MiB); // p still pending: served from the 17 MiB remainder
        assertThat(q).isEqualTo(p + 3 * MiB);
        dev.completeEvents(s1); // no polling on completion itself
        assertThat(a.internals().pendingFreeBlocks()).isEqualTo(1);
        long r = a.malloc(3 * MiB); // process_events frees p first, then best fit reuses it
        assertThat(r).isEqualTo(p);
        assertThat(a.internals().pendingFreeBlocks()).isZero();
        List<TraceEntry> t = a.snapshot().deviceTraces().getFirst();
        assertThat(t)
                .extracting(TraceEntry::action)
                .containsSubsequence(
                        TraceAction.FREE_REQUESTED, TraceAction.ALLOC, TraceAction.FREE_COMPLETED, TraceAction.ALLOC);
        a.internals().checkInvariants();
    }

    @Test
    void blockWaitsForEveryRecordedStreamAndQueuesAreIndependent() {
        SimulatedDevice dev =
                SimulatedDevice.builder().capacity(1L << 30).holdEvents(true).build();
        CachingAllocator a = new CachingAllocator(dev);
        long s1 = dev.createStream();
        long s2 = dev.createStream();
        long p = a.malloc(MiB);
        long q = a.malloc(MiB / 2);
        a.recordStream(p, s1);
        a.recordStream(p, s2);
        a.recordStream(q, s2);
        a.free(p);
        a.free(q);
        assertThat(a.internals().pendingFreeBlocks()).isEqualTo(2);
        dev.completeEvents(s1);
        a.malloc(512);
        assertThat(a.internals().pendingFreeBlocks()).isEqualTo(2); // p still waits on s2
        dev.completeNextEvent(s2); // p's s2 event only (recorded first)
        a.malloc(512);
        assertThat(a.internals().pendingFreeBlocks()).isEqualTo(1);
        a.internals().checkInvariants();
        a.emptyCache(); // synchronises the rest
        assertThat(a.internals().pendingFreeBlocks()).isZero();
        assertThat(a.stats().toPyTorchMap().get("num_sync_all_streams")).isEqualTo(1);
        a.internals().checkInvariants();
    }

    @Test
    void headOfLineEventBlocksLaterEventsOfTheSameStream() {
        SimulatedDevice dev =
                SimulatedDevice.builder().capacity(1L << 30).holdEvents(true).build();
        CachingAllocator a = new CachingAllocator(dev);
        long s1 = dev.createStream();
        long s2 = dev.createStream();
        long p = a.malloc(MiB);
        long q = a.malloc(MiB / 2);
        a.recordStream(p, s1); // p: event on s1 (not completed)
        a.recordStream(q, s1); // q: event on s1 behind p's
        a.free(p);
        a.free(q);
        long r = a.malloc(4 * MiB);
        a.recordStream(r, s2);
        a.free(r);
        dev.completeEvents(s2);
        a.malloc(512);
        assertThat(a.internals().pendingFreeBlocks()).isEqualTo(2); // s2's queue drained, s1's head blocks q
        dev.completeNextEvent(s1);
        a.malloc(512);
        assertThat(a.internals().pendingFreeBlocks()).isEqualTo(1);
        a.internals().checkInvariants();
    }

    @Test
    void aBlockUsedOnManyStreamsWaitsForOneEventOnEach() {
        SimulatedDevice dev =
                SimulatedDevice.builder().capacity(1L << 30).holdEvents(true).build();
        CachingAllocator a = new CachingAllocator(dev);
        long[] users = new long[6];
        for (int i = 0; i < users.length; i++) {
            users[i] = dev.createStream();
        }
        long p = a.malloc(MiB);
        for (long s : users) {
            a.recordStream(p, s);
            a.recordStream(p, s); // a stream recorded twice waits once
        }
        a.recordStream(p, 0); // the block's own stream needs no event
        a.free(p);
        assertThat(dev.callCount(DeviceOp.RECORD_EVENT)).isEqualTo(users.length);
        for (int i = 0; i < users.length; i++) {
            a.malloc(512); // process_events: the block waits while any of its streams has not completed
            assertThat(a.internals().pendingFreeBlocks())
                    .as("after %d streams completed", i)
                    .isEqualTo(1);
            dev.completeEvents(users[i]);
        }
        a.malloc(512);
        assertThat(a.internals().pendingFreeBlocks()).isZero();
        a.internals().checkInvariants();
    }
}
