package io.gpumem.spill;

import static io.gpumem.testing.TestSizes.MiB;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.gpumem.alloc.CachingAllocator;
import io.gpumem.device.SimulatedDevice;
import io.gpumem.oom.OutOfMemoryException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.SplittableRandom;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class SpillingAllocatorTest {

    @TempDir
    Path dir;

    private final Arena arena = Arena.ofAuto();

    private static SimulatedDevice device(long capacity) {
        return SimulatedDevice.builder().capacity(capacity).backed(true).build();
    }

    private void fill(SimulatedDevice d, long address, long size, long seed) {
        MemorySegment s = arena.allocate(size);
        SplittableRandom r = new SplittableRandom(seed);
        for (long i = 0; i < size; i += 8) {
            s.set(ValueLayout.JAVA_LONG_UNALIGNED, i, r.nextLong());
        }
        d.copyToDevice(address, s, size);
    }

    private void check(SimulatedDevice d, long address, long size, long seed) {
        MemorySegment s = arena.allocate(size);
        d.copyToHost(s, address, size);
        SplittableRandom r = new SplittableRandom(seed);
        for (long i = 0; i < size; i += 8) {
            if (s.get(ValueLayout.JAVA_LONG_UNALIGNED, i) != r.nextLong()) {
                throw new AssertionError("buffer seeded " + seed + " differs at byte " + i);
            }
        }
    }

    @Test
    void aLiveSetTwiceTheDeviceFinishesWithEveryByteIntact() {
        long seed = 20261201L;
        System.out.println("seed=" + seed);
        SimulatedDevice d = device(64 * MiB);
        SplittableRandom rnd = new SplittableRandom(seed);
        try (SpillingAllocator a = new SpillingAllocator(new CachingAllocator(d), 40 * MiB, dir)) {
            List<SpillableBuffer> buffers = new ArrayList<>();
            long live = 0;
            while (live < 128 * MiB) { // twice the device
                long size = (11 + rnd.nextInt(4)) * MiB + 8L * rnd.nextInt(512); // a segment each
                SpillableBuffer b = a.allocateSpillable(size, rnd.nextInt(3));
                fill(d, b.acquire(), size, seed + buffers.size());
                b.release();
                buffers.add(b);
                live += size;
            }
            for (int round = 0; round < 3; round++) {
                for (int k = 0; k < buffers.size(); k++) {
                    int i = rnd.nextInt(buffers.size());
                    SpillableBuffer b = buffers.get(i);
                    check(d, b.acquire(), b.size(), seed + i);
                    b.release();
                }
            }
            SpillStats s = a.spillStats();
            System.out.println(s);
            assertThat(s.spillsToHost()).isPositive();
            assertThat(s.spillsToDisk()).as("the host budget runs out").isPositive();
            assertThat(s.unspills()).isPositive();
            assertThat(s.oomRetries()).isPositive();
            assertThat(s.bytesToHost() + s.bytesToDisk()).isGreaterThanOrEqualTo(64 * MiB);
            for (int i = 0; i < buffers.size(); i++) {
                SpillableBuffer b = buffers.get(i);
                check(d, b.acquire(), b.size(), seed + i);
                b.release();
                b.close();
                assertThat(b.location()).isEqualTo(SpillableBuffer.Location.CLOSED);
            }
            assertThat(a.hostBytesUsed()).isZero();
        }
        try (var files = java.nio.file.Files.list(dir)) {
            assertThat(files.toList()).as("spill files are deleted").isEmpty();
        } catch (java.io.IOException e) {
            throw new java.io.UncheckedIOException(e);
        }
    }

    @Test
    void lowestPriorityThenLeastRecentlyUsedSpillsFirstAndPinnedBuffersNever() {
        SimulatedDevice d = device(64 * MiB); // buffers above 10 MiB get segments of their own size
        try (SpillingAllocator a = new SpillingAllocator(new CachingAllocator(d), 64 * MiB, null)) {
            SpillableBuffer important = a.allocateSpillable(12 * MiB, 5);
            SpillableBuffer cheapOld = a.allocateSpillable(12 * MiB, 0);
            SpillableBuffer cheapNew = a.allocateSpillable(12 * MiB, 0);
            SpillableBuffer pinned = a.allocateSpillable(12 * MiB, -1);
            pinned.acquire();
            long p = a.malloc(24 * MiB);
            assertThat(cheapOld.location()).isEqualTo(SpillableBuffer.Location.HOST);
            assertThat(cheapNew.location()).isEqualTo(SpillableBuffer.Location.DEVICE);
            assertThat(important.location()).isEqualTo(SpillableBuffer.Location.DEVICE);
            assertThat(pinned.location()).isEqualTo(SpillableBuffer.Location.DEVICE);
            a.free(p);
            pinned.release();
        }
    }

    @Test
    void withNothingLeftToSpillTheOriginalOutOfMemoryIsThrown() {
        SimulatedDevice d = device(32 * MiB);
        try (SpillingAllocator a = new SpillingAllocator(new CachingAllocator(d), 0, null)) {
            SpillableBuffer b = a.allocateSpillable(12 * MiB, 0);
            assertThatThrownBy(() -> a.malloc(24 * MiB)).isInstanceOf(OutOfMemoryException.class);
            assertThat(b.location()).isEqualTo(SpillableBuffer.Location.DEVICE);
            assertThat(a.spillStats().spills()).isZero();
        }
    }

    /**
     * A request no spilling can serve (refused outright at 1 EB, or larger than all the memory the process can reach)
     * fails at once, leaving every buffer where it is: the class spills no more than a request needs.
     */
    @Test
    void aRequestNoSpillingCanServeSpillsNothing() {
        SimulatedDevice d = device(64 * MiB);
        try (SpillingAllocator a = SpillingAllocator.accountingOnly(new CachingAllocator(d), 1L << 40)) {
            SpillableBuffer b1 = a.allocateSpillable(12 * MiB, 0);
            SpillableBuffer b2 = a.allocateSpillable(12 * MiB, 0);
            assertThatThrownBy(() -> a.malloc(1L << 60))
                    .isInstanceOf(OutOfMemoryException.class)
                    .hasMessage("CUDA out of memory. Tried to allocate more than 1EB memory.");
            assertThatThrownBy(() -> a.malloc(128 * MiB)).isInstanceOf(OutOfMemoryException.class);
            assertThat(b1.location()).isEqualTo(SpillableBuffer.Location.DEVICE);
            assertThat(b2.location()).isEqualTo(SpillableBuffer.Location.DEVICE);
            assertThat(a.spillStats().spills()).isZero();
            assertThat(a.spillStats().oomRetries()).isZero();
            // a request spilling can serve still spills, one buffer at a time
            long big = a.malloc(48 * MiB);
            assertThat(a.spillStats().spills()).isPositive();
            a.free(big);
        }
    }

    /**
     * A spillable buffer's memory is freed by closing the buffer, never by a plain free: freed that way, the buffer
     * would free its stale address again when closed or spilled, by then perhaps someone else's allocation.
     */
    @Test
    void aPlainFreeOfASpillableBuffersMemoryIsRefused() {
        SimulatedDevice d = device(64 * MiB);
        try (SpillingAllocator a = SpillingAllocator.accountingOnly(new CachingAllocator(d), 1L << 40)) {
            SpillableBuffer b = a.allocateSpillable(12 * MiB, 0);
            long address = b.acquire();
            b.release();
            assertThatThrownBy(() -> a.free(address))
                    .isInstanceOf(IllegalArgumentException.class)
                    .hasMessageContaining("spillable buffer");
            assertThat(a.stats().allocatedBytes()).isEqualTo(12 * MiB);
            long other = a.malloc(12 * MiB);
            b.close();
            a.free(other); // still the caller's to free
            assertThat(a.stats().allocatedBytes()).isZero();
            // after a spill and a return the buffer may sit elsewhere: its new address is guarded, the old one not
            SpillableBuffer c = a.allocateSpillable(12 * MiB, 0);
            long first = c.acquire();
            c.release();
            long filler = a.malloc(56 * MiB); // with c's 12 MiB segment more than the device: spills c
            assertThat(c.location()).isNotEqualTo(SpillableBuffer.Location.DEVICE);
            a.free(filler);
            long again = c.acquire();
            c.release();
            assertThatThrownBy(() -> a.free(again)).isInstanceOf(IllegalArgumentException.class);
            if (again != first) {
                long reuse = a.malloc(12 * MiB);
                a.free(reuse);
            }
            c.close();
            assertThat(a.stats().allocatedBytes()).isZero();
        }
    }

    @Test
    void anAccountingOnlySpillMovesNoBytesButKeepsTheBooks() throws Exception {
        // no byte backing: the buffers have no contents, spills only move them off the device and count
        SimulatedDevice d = SimulatedDevice.builder().capacity(48 * MiB).build();
        try (SpillingAllocator a = SpillingAllocator.accountingOnly(new CachingAllocator(d), 12 * MiB)) {
            SpillableBuffer first = a.allocateSpillable(12 * MiB, 0);
            SpillableBuffer second = a.allocateSpillable(12 * MiB, 0);
            SpillableBuffer third = a.allocateSpillable(12 * MiB, 0);
            long p = a.malloc(36 * MiB); // two must go: the first to the host budget, the second to "disk"
            assertThat(first.location()).isEqualTo(SpillableBuffer.Location.HOST);
            assertThat(second.location()).isEqualTo(SpillableBuffer.Location.DISK);
            assertThat(third.location()).isEqualTo(SpillableBuffer.Location.DEVICE);
            assertThat(a.hostBytesUsed()).isEqualTo(12 * MiB);
            SpillStats s = a.spillStats();
            assertThat(s.spillsToHost()).isEqualTo(1);
            assertThat(s.spillsToDisk()).isEqualTo(1);
            assertThat(s.bytesToDisk()).isEqualTo(12 * MiB);
            assertThat(s.oomRetries()).isEqualTo(2);
            try (var files = Files.list(Path.of("."))) {
                assertThat(files.filter(f -> f.getFileName().toString().startsWith("spill-")))
                        .as("nothing written where the books say \"disk\"")
                        .isEmpty();
            }

            a.free(p);
            first.acquire(); // back from the host: its budget is free again
            assertThat(first.location()).isEqualTo(SpillableBuffer.Location.DEVICE);
            assertThat(a.hostBytesUsed()).isZero();
            first.release();
            second.close(); // closing a buffer on "disk" frees nothing on the device and leaves no file
            assertThat(a.spillStats().unspills()).isEqualTo(1);
            assertThat(a.spillStats().bytesUnspilled()).isEqualTo(12 * MiB);
        }
    }

    @Test
    void closingASpilledBufferGivesBackItsHostBudgetAndDeletesItsFile() throws Exception {
        SimulatedDevice d = device(48 * MiB);
        try (SpillingAllocator a = new SpillingAllocator(new CachingAllocator(d), 12 * MiB, dir)) {
            SpillableBuffer onHost = a.allocateSpillable(12 * MiB, 0);
            SpillableBuffer onDisk = a.allocateSpillable(12 * MiB, 0);
            a.allocateSpillable(12 * MiB, 1);
            long p = a.malloc(36 * MiB);
            assertThat(onHost.location()).isEqualTo(SpillableBuffer.Location.HOST);
            assertThat(onDisk.location()).isEqualTo(SpillableBuffer.Location.DISK);
            try (var files = Files.list(dir)) {
                assertThat(files.count()).isEqualTo(1);
            }
            onHost.close();
            assertThat(a.hostBytesUsed()).isZero();
            onDisk.close();
            try (var files = Files.list(dir)) {
                assertThat(files.count()).as("the spill file is deleted").isZero();
            }
            onDisk.close(); // a second close does nothing
            assertThatThrownBy(onDisk::acquire).hasMessageContaining("is closed");
            a.free(p);
        }
    }
}
