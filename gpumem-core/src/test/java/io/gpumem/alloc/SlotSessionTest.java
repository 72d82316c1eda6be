package io.gpumem.alloc;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.gpumem.config.AllocatorConfig;
import io.gpumem.device.SimulatedDevice;
import io.gpumem.history.MemorySnapshot;
import io.gpumem.oom.OutOfMemoryException;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/**
 * {@link SlotSession}: a session decides exactly as the allocator's own malloc and free, keeps
 * {@code allocated_blocks} whole for every other reader, leaves the allocator as the same requests through the
 * facade would, and excludes other threads and the facade's mutators while open.
 */
class SlotSessionTest {
    private static final long MiB = 1L << 20;
    private static final long GiB = 1L << 30;

    private static CachingAllocator allocator(long capacity, String conf) {
        return new CachingAllocator(SimulatedDevice.withCapacity(capacity), AllocatorConfig.parse(conf));
    }

    /**
     * The same seeded random requests (sizes from 1 byte to 300 MiB, two streams, empty_cache now and then, OOMs on
     * a small device) through the facade and through a session: the same address or failure for every request,
     * and the same state at the end.
     */
    @Test
    void aSessionDecidesAsTheFacadeDoes() {
        for (String conf : new String[] {"", "expandable_segments:True", "max_split_size_mb:64"}) {
            long seed = new Random().nextLong();
            System.out.println("SlotSessionTest seed " + seed + " conf '" + conf + "'");
            CachingAllocator byAddress = allocator(2 * GiB, conf);
            CachingAllocator bySlot = allocator(2 * GiB, conf);
            Random r = new Random(seed);
            int slots = 400;
            long[] held = new long[slots];
            List<String> facade = new ArrayList<>();
            List<String> session = new ArrayList<>();
            List<int[]> script = new ArrayList<>(); // {kind, slot, sizeIndex}
            long[] sizes = new long[3000];
            for (int i = 0; i < sizes.length; i++) {
                sizes[i] = r.nextInt(4) == 0 ? 1 + r.nextInt(300) * MiB : 1 + r.nextInt(2 * (int) MiB);
            }
            for (int i = 0; i < sizes.length; i++) {
                script.add(new int[] {r.nextInt(50) == 0 ? 2 : r.nextInt(2), r.nextInt(slots), i});
            }
            for (int[] step : script) {
                facade.add(play(byAddress, held, step, sizes));
            }
            try (SlotSession s = bySlot.internals().openSlots(slots)) {
                for (int[] step : script) {
                    session.add(play(s, step, sizes));
                }
                bySlot.internals().checkInvariants(); // every slot's block names its slot, and no other block does
            }
            assertThat(facade).as("the requests reach OOMs").anyMatch(x -> x.startsWith("oom"));
            assertThat(session).as("seed %d", seed).isEqualTo(facade);
            assertThat(bySlot.snapshot().segments())
                    .as("seed %d", seed)
                    .isEqualTo(byAddress.snapshot().segments());
            bySlot.internals().checkInvariants();
            assertThat(bySlot.stats()).isEqualTo(byAddress.stats());
        }
    }

    private static String play(CachingAllocator a, long[] held, int[] step, long[] sizes) {
        int slot = step[1];
        try {
            if (step[0] == 2) {
                a.emptyCache();
                return "empty";
            }
            if (held[slot] != 0) {
                a.free(held[slot]);
                held[slot] = 0;
                return "free " + slot;
            }
            held[slot] = a.malloc(sizes[step[2]], step[2] % 3 == 0 ? 7 : 0);
            return "malloc " + slot + " at " + held[slot];
        } catch (OutOfMemoryException e) {
            return "oom " + e.getMessage();
        }
    }

    private static String play(SlotSession s, int[] step, long[] sizes) {
        int slot = step[1];
        try {
            if (step[0] == 2) {
                s.emptyCache();
                return "empty";
            }
            if (s.address(slot) != 0) {
                s.free(slot);
                return "free " + slot;
            }
            return "malloc " + slot + " at " + s.malloc(slot, sizes[step[2]], step[2] % 3 == 0 ? 7 : 0);
        } catch (OutOfMemoryException e) {
            return "oom " + e.getMessage();
        }
    }

    @Test
    void otherReadersSeeTheSessionsBlocksAndTheFacadeFreesThemAfterClose() {
        CachingAllocator a = allocator(GiB, "");
        long before = a.malloc(3 * MiB);
        long inSession;
        try (SlotSession s = a.internals().openSlots(4)) {
            inSession = s.malloc(0, 5 * MiB, 0);
            s.malloc(1, 7 * MiB, 0);
            // a snapshot (another reader of allocated_blocks) sees every live block
            MemorySnapshot snap = a.snapshot();
            assertThat(snap.segments().stream()
                            .flatMap(seg -> seg.blocks().stream())
                            .filter(b -> b.isAllocated())
                            .count())
                    .isEqualTo(3);
            a.internals().checkInvariants();
            // from then on the session keeps the table
            s.free(1);
            a.internals().checkInvariants();
            assertThat(a.internals().blockSize(inSession)).isEqualTo(5 * MiB);
        }
        a.internals().checkInvariants();
        a.free(inSession);
        a.free(before);
        assertThat(a.allocatedBytes()).isZero();
    }

    @Test
    void theFacadesMutatorsRefuseWhileASessionIsOpen() {
        CachingAllocator a = allocator(GiB, "");
        long p = a.malloc(MiB);
        long inSession;
        try (SlotSession s = a.internals().openSlots(2)) {
            assertThatThrownBy(() -> a.malloc(MiB)).isInstanceOf(IllegalStateException.class);
            assertThatThrownBy(() -> a.free(p)).isInstanceOf(IllegalStateException.class);
            assertThatThrownBy(a::emptyCache).isInstanceOf(IllegalStateException.class);
            assertThatThrownBy(a::close).isInstanceOf(IllegalStateException.class);
            assertThatThrownBy(() -> a.internals().openSlots(1))
                    .isInstanceOf(IllegalStateException.class)
                    .hasMessageContaining("already");
            inSession = s.malloc(0, MiB, 0);
        }
        a.free(p);
        assertThat(a.allocatedBytes()).isEqualTo(MiB);
        a.free(inSession); // nothing read the table during the session: close put the block there
        assertThat(a.allocatedBytes()).isZero();
    }

    @Test
    void adoptTakesAnOutsideAllocationIntoASlot() {
        CachingAllocator a = allocator(GiB, "");
        long p = a.malloc(2 * MiB);
        try (SlotSession s = a.internals().openSlots(3)) {
            assertThat(s.adopt(0, p)).isTrue();
            assertThat(s.address(0)).isEqualTo(p);
            assertThat(s.adopt(1, p + 512)).as("nothing allocated there").isFalse();
            assertThatThrownBy(() -> s.adopt(0, p)).isInstanceOf(IllegalArgumentException.class);
            s.free(0);
            assertThat(s.address(0)).isZero();
        }
        assertThat(a.allocatedBytes()).isZero();
        assertThatThrownBy(() -> a.free(p)).isInstanceOf(IllegalArgumentException.class);
    }

    @Test
    void badRequestsAreRefusedAndChangeNothing() {
        CachingAllocator a = allocator(GiB, "");
        try (SlotSession s = a.internals().openSlots(2)) {
            long p = s.malloc(0, MiB, 0);
            assertThatThrownBy(() -> s.malloc(0, MiB, 0))
                    .isInstanceOf(IllegalArgumentException.class)
                    .hasMessageContaining("slot 0 already holds");
            assertThatThrownBy(() -> s.malloc(1, -1, 0)).isInstanceOf(IllegalArgumentException.class);
            assertThatThrownBy(() -> s.malloc(2, MiB, 0)).isInstanceOf(IndexOutOfBoundsException.class);
            assertThatThrownBy(() -> s.free(1))
                    .isInstanceOf(IllegalArgumentException.class)
                    .hasMessageContaining("slot 1 holds no allocation");
            assertThat(s.malloc(1, 0, 0)).as("a zero-byte request").isZero();
            assertThatThrownBy(() -> s.malloc(1, 1L << 60, 0)).isInstanceOf(OutOfMemoryException.class);
            s.freeAddress(p);
            assertThat(s.address(0)).isZero();
            assertThatThrownBy(() -> s.freeAddress(p))
                    .isInstanceOf(IllegalArgumentException.class)
                    .hasMessageContaining("double free");
        }
        a.internals().checkInvariants();
        assertThat(a.allocatedBytes()).isZero();
    }

    /** An uncounted allocator's OOM report sums allocated_blocks: the session's blocks count. */
    @Test
    void anUncountedOomReportCountsTheSessionsBlocks() {
        CachingAllocator a =
                CachingAllocator.uncounted(SimulatedDevice.withCapacity(100 * MiB), AllocatorConfig.defaults());
        try (SlotSession s = a.internals().openSlots(2)) {
            s.malloc(0, 60 * MiB, 0);
            assertThatThrownBy(() -> s.malloc(1, 60 * MiB, 0))
                    .isInstanceOfSatisfying(
                            OutOfMemoryException.class,
                            e -> assertThat(e.report().allocatedBytes()).isEqualTo(60 * MiB));
            s.free(0);
            assertThat(s.malloc(1, 60 * MiB, 0)).isNotZero();
        }
    }

    @Test
    void anotherThreadWaitsUntilTheSessionCloses() throws Exception {
        CachingAllocator a = allocator(GiB, "");
        CompletableFuture<Long> other;
        try (SlotSession s = a.internals().openSlots(1)) {
            s.malloc(0, MiB, 0);
            other = CompletableFuture.supplyAsync(() -> a.malloc(MiB));
            Thread.sleep(50);
            assertThat(other).as("the session holds the lock").isNotDone();
        }
        assertThat(other.get(10, TimeUnit.SECONDS)).isNotZero();
        assertThat(a.allocatedBytes()).isEqualTo(2 * MiB);
    }

    @Test
    void aClosedSessionRefusesAndCloseIsIdempotent() {
        CachingAllocator a = allocator(GiB, "");
        SlotSession s = a.internals().openSlots(1);
        s.close();
        s.close();
        assertThatThrownBy(() -> s.malloc(0, MiB, 0)).isInstanceOf(IllegalStateException.class);
        a.close();
        assertThatThrownBy(() -> a.internals().openSlots(1)).isInstanceOf(IllegalStateException.class);
    }

    @Test
    void freeBySlotAndAddressTakesTheSlotsBlockElseTheAllocationThere() {
        CachingAllocator a = allocator(GiB, "");
        long before = a.malloc(3 * MiB);
        try (SlotSession s = a.internals().openSlots(3)) {
            assertThat(s.slots()).isEqualTo(3);
            long p = s.malloc(0, MiB, 0);
            long q = s.malloc(1, 2 * MiB, 0);
            s.free(0, p);
            assertThat(s.address(0)).isZero();
            assertThat(s.address(1)).as("only slot 0's block").isEqualTo(q);
            // slot 2 never held anything: the caller's slot names an allocation made before the session
            s.free(2, before);
            assertThatThrownBy(() -> s.free(2, before))
                    .isInstanceOf(IllegalArgumentException.class)
                    .hasMessageContaining("double free");
            // a slot holding another address: the address decides
            assertThatThrownBy(() -> s.free(1, q + 512)).isInstanceOf(IllegalArgumentException.class);
            assertThat(s.address(1)).isEqualTo(q);
            assertThatThrownBy(() -> s.free(-1)).isInstanceOf(IllegalArgumentException.class);
            assertThatThrownBy(() -> s.free(3)).isInstanceOf(IllegalArgumentException.class);
            s.free(1);
        }
        a.internals().checkInvariants();
        assertThat(a.allocatedBytes()).isZero();
    }

    @Test
    void freeAddressFindsASlotsBlockBeforeAndAfterTheTableIsKept() {
        CachingAllocator a = allocator(GiB, "");
        long before = a.malloc(3 * MiB);
        try (SlotSession s = a.internals().openSlots(3)) {
            s.malloc(0, MiB, 0);
            long q = s.malloc(1, 2 * MiB, 0);
            s.freeAddress(q); // not in the table: the session puts its blocks there, and keeps it from now on
            assertThat(s.address(1)).isZero();
            a.internals().checkInvariants();
            assertThat(s.address(0)).isNotZero();
            long r = s.malloc(2, 4 * MiB, 0);
            a.snapshot(); // another reader: the session keeps the table from now on
            assertThat(s.adopt(1, r))
                    .as("a slot's own block is no outside allocation")
                    .isFalse();
            s.freeAddress(r); // found in the table, and its slot emptied
            assertThat(s.address(2)).isZero();
            assertThat(s.adopt(1, before)).isTrue();
            a.internals().checkInvariants();
            s.free(1);
            assertThatThrownBy(() -> s.freeAddress(before)).isInstanceOf(IllegalArgumentException.class);
            s.freeAddress(0); // nothing, as free(0)
            long zero = s.address(0);
            assertThat(s.adopt(1, zero)).as("slot 0's block").isFalse();
            s.freeAddress(zero);
            assertThat(s.address(0)).isZero();
            long again = s.malloc(0, MiB, 0);
            s.free(3, again); // a slot beyond the session's: by address
            assertThat(s.address(0)).isZero();
            s.malloc(0, MiB, 0);
        }
        a.internals().checkInvariants();
        assertThat(a.allocatedBytes()).isEqualTo(MiB);
    }

    @Test
    void theExabyteRuleIsTheAllocators() {
        CachingAllocator a = allocator(GiB, "");
        try (SlotSession s = a.internals().openSlots(1)) {
            assertThatThrownBy(() -> s.malloc(0, (1L << 60) - 1, 0))
                    .isInstanceOfSatisfying(
                            OutOfMemoryException.class,
                            e -> assertThat(e.report().moreThanOneExabyte()).isFalse());
            assertThatThrownBy(() -> s.malloc(0, 1L << 60, 0))
                    .isInstanceOfSatisfying(
                            OutOfMemoryException.class,
                            e -> assertThat(e.report().moreThanOneExabyte()).isTrue());
            assertThat(s.address(0)).isZero();
        }
    }

    @Test
    void aSessionOfNoSlotsOpensAndANegativeCountIsRefusedWithoutHoldingTheLock() throws Exception {
        CachingAllocator a = allocator(GiB, "");
        try (SlotSession s = a.internals().openSlots(0)) {
            assertThat(s.slots()).isZero();
        }
        assertThatThrownBy(() -> a.internals().openSlots(-1))
                .isInstanceOf(IllegalArgumentException.class)
                .hasMessageContaining("-1");
        // the refused open left the lock free for another thread
        assertThat(CompletableFuture.supplyAsync(() -> a.malloc(MiB)).get(10, TimeUnit.SECONDS))
                .isNotZero();
    }

    @Test
    void everyOperationOfAClosedSessionIsRefused() {
        CachingAllocator a = allocator(GiB, "");
        long p = a.malloc(MiB);
        SlotSession s = a.internals().openSlots(2);
        s.close();
        assertThatThrownBy(() -> s.adopt(0, p)).isInstanceOf(IllegalStateException.class);
        assertThatThrownBy(() -> s.free(0)).isInstanceOf(IllegalStateException.class);
        assertThatThrownBy(() -> s.freeAddress(p)).isInstanceOf(IllegalStateException.class);
        assertThatThrownBy(s::emptyCache).isInstanceOf(IllegalStateException.class);
        a.free(p);
    }
}
