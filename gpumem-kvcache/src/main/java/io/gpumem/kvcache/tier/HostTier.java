package io.gpumem.kvcache.tier;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Iterator;
import java.util.List;
import java.util.Map;

/**
 * The host tier of the KV block cache (the {@code kv-sim --host-tier} option): off-heap memory (FFM
 * {@link Arena}) cut into fixed slots of one {@link BlockRecord} each, within a byte budget, holding copies of
 * evicted prefix-cache blocks by content key. Lossy by contract like every {@link BlockTier}: a full budget
 * evicts the least recently used record. Preempted requests' blocks do not live here but in the swap space
 * ({@code HostSwapSpace}), which must never lose them. Slots are allocated in chunks of up to {@value #CHUNK_SLOTS} as the tier
 * fills, so a large budget costs nothing until used.
 *
 * <p>Invariants: the index maps each held key to exactly one slot; a slot is either in the index or on
 * the free stack; {@code index.size() × recordBytes ≤ capacity}. The index iterates least recently used
 * first (access order), which is the eviction order when a store needs a slot and the budget is spent.
 */
public final class HostTier extends LocalTier<Integer> {
    private static final int CHUNK_SLOTS = 256;

    private final Arena arena = Arena.ofShared();
    private final int maxSlots;
    private final List<MemorySegment> chunks = new ArrayList<>();
    private int[] freeSlots = new int[0];
    private int freeTop;
    private int slotsMade;

    public HostTier(BlockRecord layout, long capacityBytes) {
        super("host", layout, capacityBytes);
        this.maxSlots = (int) Math.min(Integer.MAX_VALUE - 8, capacityBytes / recordBytes);
    }

    @Override
    boolean store(MemorySegment record, long hi, long lo, Spill spill) {
        BlockKey key = new BlockKey(hi, lo);
        if (index.get(key) != null) {
            return true;
        }
        int slot = takeSlot(spill);
        MemorySegment.copy(record, 0, slot(slot), 0, recordBytes);
        index.put(key, slot);
        return true;
    }

    private int takeSlot(Spill spill) {
        if (freeTop > 0) {
            return freeSlots[--freeTop];
        }
        if (slotsMade < maxSlots) {
            if (slotsMade % CHUNK_SLOTS == 0) {
                int n = Math.min(CHUNK_SLOTS, maxSlots - slotsMade);
                chunks.add(arena.allocate(n * recordBytes, 64));
            }
            return slotsMade++;
        }
        Iterator<Map.Entry<BlockKey, Integer>> lru = index.entrySet().iterator();
        Map.Entry<BlockKey, Integer> victim = lru.next();
        int slot = victim.getValue();
        lru.remove();
        evicted++;
        spill.evicted(slot(slot), victim.getKey().hi(), victim.getKey().lo());
        return slot;
    }

    private MemorySegment slot(int slot) {
        return chunks.get(slot / CHUNK_SLOTS).asSlice((slot % CHUNK_SLOTS) * recordBytes, recordBytes);
    }

    @Override
    boolean load(long hi, long lo, MemorySegment dst) {
        Integer slot = index.get(new BlockKey(hi, lo));
        if (slot == null) {
            return false;
        }
        MemorySegment.copy(slot(slot), 0, dst, 0, recordBytes);
        return true;
    }

    @Override
    void remove(long hi, long lo) {
        Integer slot = index.remove(new BlockKey(hi, lo));
        if (slot != null) {
            if (freeTop == freeSlots.length) {
                freeSlots = Arrays.copyOf(freeSlots, Math.max(16, freeTop * 2));
            }
            freeSlots[freeTop++] = slot;
        }
    }

    @Override
    public void close() {
        index.clear();
        arena.close();
    }
}
