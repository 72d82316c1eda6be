package io.gpumem.alloc;

import io.gpumem.config.AllocatorConfig;
import io.gpumem.device.Device;
import io.gpumem.history.Frame;
import io.gpumem.history.HistoryOptions;
import io.gpumem.history.MemorySnapshot;
import io.gpumem.oom.OutOfMemoryException;
import io.gpumem.stats.MemoryStats;
import io.gpumem.stats.MemorySummary;
import java.util.List;
import java.util.Objects;
import java.util.function.Supplier;

/**
 * PyTorch's native CUDA caching allocator ({@code DeviceCachingAllocator}, 2.5 era) over any {@link Device},
 * reproducing its decisions to the byte: the same segments, the same block addresses relative to the
 * segments, the same {@code memory_stats()} counters and the same memory-history trace, given the same
 * requests and the same device addresses. The size rules are {@link SizeRules}; the algorithms live in the
 * package-private {@code AllocatorCore}.
 *
 * <h2>Use</h2>
 * <pre>{@code
 * try (var allocator = new CachingAllocator(SimulatedDevice.withCapacity(80L << 30))) {
 *     long p = allocator.malloc(1 << 20);
 *     allocator.free(p);
 *     long reserved = allocator.stats().reservedBytes();
 * }
 * }</pre>
 * {@link #malloc(long, long)} / {@link #free(long)} / {@link #recordStream(long, long)} / {@link #emptyCache()}
 * as in PyTorch; {@link #stats()}, {@link #snapshot()} and {@link #recordHistory(HistoryOptions)} for
 * observation; {@link #setSettings} / {@link #setMemoryFraction} to configure. Replay and test hooks (state
 * import, trace listeners, the clock, invariant checks) are behind {@link #internals()}.
 *
 * <h2>Thread safety</h2>
 * One lock per allocator (PyTorch also uses one recursive mutex per device). Every public method takes it. It is an
 * {@code AllocatorLock}: reentrant, with an uncontended cost of one compare-and-set plus one plain release store.
 *
 * <h2>Bad input</h2>
 * A negative size, or freeing / recording a stream on a pointer this allocator did not hand out or has already
 * freed, throws {@link IllegalArgumentException} naming the pointer in hex; the state is untouched. After
 * {@link #close()}, malloc, free, recordStream and emptyCache throw {@link IllegalStateException}; stats and
 * snapshots still read the final state.
 */
public final class CachingAllocator implements ForkableAllocator {
    private final AllocatorLock lock = new AllocatorLock();
    private final AllocatorCore core;
    private final AllocatorInternals internals;

    public CachingAllocator(Device device) {
        this(device, AllocatorConfig.defaults());
    }

    public CachingAllocator(Device device, AllocatorConfig config) {
        this.core =
                new AllocatorCore(Objects.requireNonNull(device, "device"), Objects.requireNonNull(config, "config"));
        this.internals = new AllocatorInternals(lock, core);
    }

    /**
     * A new allocator that keeps no statistics, for a replay that compares its decisions and reads none of its
     * counters (an oracle check): it decides exactly as a counted one, and {@link #stats()} and the other readers of
     * the counters throw, as for an {@link #uncountedCopyOnto} copy, whose class comment says why that is safe.
     */
    public static CachingAllocator uncounted(Device device, AllocatorConfig config) {
        return new CachingAllocator(new AllocatorCore(
                Objects.requireNonNull(device, "device"), Objects.requireNonNull(config, "config"), false));
    }

    private CachingAllocator(AllocatorCore core) {
        this.core = core;
        this.internals = new AllocatorInternals(lock, core);
    }

    /**
     * An independent deep copy of this allocator's state (blocks, segments, pools and their GC clocks, stats,
     * configuration) working on {@code device}, which must be a copy of this allocator's device taken at the same
     * moment (e.g. {@link io.gpumem.device.SimulatedDevice#copyWithCapacity}): what a what-if replay forks to
     * reuse a replayed prefix. Mutating either leaves the other unchanged. Refused (IllegalStateException) when
     * the copy could not be exact: after {@link #close()}, with expandable segments, with stream events pending,
     * or while history, trackers or listeners are attached (recorded history is not copied).
     */
    @Override
    public CachingAllocator copyOnto(Device device) {
        return copy(device, true);
    }

    /**
     * A {@link #copyOnto} copy that keeps no statistics, for replays that only ask whether requests succeed (the
     * capacity search's probes): it decides exactly as a counted copy and its out-of-memory reports carry the
     * same figures (recomputed from its blocks), but {@link #stats()}, {@link #allocatedBytes()} and the other
     * readers of the counters throw {@link IllegalStateException}. Copies of it are uncounted too.
     */
    @Override
    public CachingAllocator uncountedCopyOnto(Device device) {
        return copy(device, false);
    }

    private CachingAllocator copy(Device device, boolean counted) {
        Objects.requireNonNull(device, "device");
        lock.lock();
        try {
            if (core.closed) {
                throw new IllegalStateException("cannot copy a closed allocator");
            }
            return new CachingAllocator(new AllocatorCore(core, device, counted));
        } finally {
            lock.unlock();
        }
    }

    /** Expandable segments size their reservation from the device's capacity. */
    @Override
    public boolean capacityShapesDecisions() {
        return core.config.expandableSegments();
    }

    /** The replay and test hooks: history, state import, trace listeners, the clock, invariant checks. */
    @Override
    public AllocatorInternals internals() {
        return internals;
    }

    @Override
    public Device device() {
        return core.device;
    }

    /** The configuration in effect (the latest {@link #setSettings} result). */
    public AllocatorConfig config() {
        return core.config;
    }

    // ---------------------------------------------------------------- allocation

    /**
     * Allocates {@code size} bytes for use on {@code stream}.
     *
     * @return the address; 0 for a zero-byte request (which touches nothing)
     * @throws OutOfMemoryException     when the device cannot provide the memory even after the cache is released,
     *                                  or the request is 1 EB or more
     * @throws IllegalArgumentException for a negative size
     */
    @Override
    public long malloc(long size, long stream) {
        if (size < 0) {
            throw new IllegalArgumentException("malloc: negative size " + size);
        }
        if (size == 0) {
            return Device.NULL;
        }
        if (size >= AllocatorCore.ONE_EXABYTE) {
            throw exabyteOom(size);
        }
        lock.lock();
        try {
            ensureOpen();
            Block b = core.malloc(size, stream);
            if (!core.allocatedBlocksBesideSession().putIfAbsent(b.ptr, b)) {
                throw new IllegalStateException("the device handed out memory at 0x" + Long.toHexString(b.ptr)
                        + " that overlaps a live allocation; the allocator state is no longer trustworthy");
            }
            return b.ptr;
        } finally {
            lock.unlock();
        }
    }

    /**
     * Taken only by an uncounted allocator ({@link #uncounted}, {@link #uncountedCopyOnto}) that records no history.
     */
    @Override
    public boolean tryMallocFreedAtOnce(long size, long stream) {
        if (size <= 0 || size >= AllocatorCore.ONE_EXABYTE) {
            return false;
        }
        lock.lock();
        try {
            ensureOpen();
            return core.tryMallocFreedAtOnce(size, stream);
        } finally {
            lock.unlock();
        }
    }

    /**
     * Refuses a change after {@code close()} or while a slot session is open; once it passes, no session is open, so
     * the address table the caller then reads as it stands is whole.
     */
    private void ensureOpen() {
        if (core.closed || core.session != null) {
            core.ensureOpen();
            throw new IllegalStateException("a slot session is open on this allocator: its thread allocates, frees and"
                    + " empties the cache through the session until it closes it");
        }
    }

    private OutOfMemoryException exabyteOom(long size) {
        lock.lock();
        try {
            return core.exabyteOom(size);
        } finally {
            lock.unlock();
        }
    }

    /**
     * Frees an address returned by {@link #malloc}. With streams recorded by {@link #recordStream}, the block is
     * reusable only once the work queued on those streams has completed. {@code free(0)} does nothing.
     *
     * @throws IllegalArgumentException for an address not allocated here or already freed
     */
    @Override
    public void free(long ptr) {
        if (ptr == Device.NULL) {
            return;
        }
        lock.lock();
        try {
            ensureOpen();
            Block b = core.allocatedBlocksBesideSession().remove(ptr);
            if (b == null) {
                throw new IllegalArgumentException("free: 0x" + Long.toHexString(ptr)
                        + " is not an allocated block of this allocator (foreign pointer or double free)");
            }
            core.free(b);
        } finally {
            lock.unlock();
        }
    }

    /**
     * Marks the block at {@code ptr} as used by {@code stream} ({@code Tensor.record_stream}); its own allocation
     * stream is ignored. {@code recordStream(0, s)} does nothing (an empty tensor).
     */
    @Override
    public void recordStream(long ptr, long stream) {
        if (ptr == Device.NULL) {
            return;
        }
        lock.lock();
        try {
            ensureOpen();
            Block b = core.allocatedBlocksBesideSession().get(ptr);
            if (b == null) {
                throw new IllegalArgumentException(
                        "recordStream: 0x" + Long.toHexString(ptr) + " is not an allocated block of this allocator");
            }
            if (stream != b.stream) {
                b.addStreamUse(stream);
            }
        } finally {
            lock.unlock();
        }
    }

    /** {@code torch.cuda.empty_cache()}: waits for pending events, releases every whole free segment and free page. */
    @Override
    public void emptyCache() {
        lock.lock();
        try {
            ensureOpen();
            core.releaseCachedBlocks(core.trace.maybeGatherContext(HistoryOptions.Context.ALL));
        } finally {
            lock.unlock();
        }
    }

    /**
     * Releases the cache as {@link #emptyCache()} does (waiting for pending stream events) and retires the
     * allocator: later mallocs, frees, stream records and cache releases throw {@link IllegalStateException}. Blocks the user still
     * holds stay allocated on the device; the device itself is not closed. Idempotent. It also gives back the
     * address ranges of expandable segments that never got a page, which {@code emptyCache} keeps as PyTorch does
     * (allocator.md §5.4): retiring the allocator stands for the end of PyTorch's process, where the driver frees
     * them.
     * Refused (IllegalStateException) while a {@link SlotSession} is open.
     */
    @Override
    public void close() {
        lock.lock();
        try {
            if (core.session != null) {
                throw new IllegalStateException("a slot session is open on this allocator: close it first");
            }
            if (!core.closed) {
                core.releaseCachedBlocks(core.trace.maybeGatherContext(HistoryOptions.Context.ALL));
                core.releasePagelessSegments();
                core.closed = true;
            }
        } finally {
            lock.unlock();
        }
    }

    /** {@code torch.cuda.set_per_process_memory_fraction}: caps reserved memory at fraction × device total. */
    public void setMemoryFraction(double fraction) {
        if (!(fraction >= 0.0 && fraction <= 1.0)) {
            throw new IllegalArgumentException("memory fraction must be in [0, 1], got " + fraction);
        }
        lock.lock();
        try {
            core.allowedMemoryMaximum = (long) (fraction * (double) core.device.totalMemory());
            core.setFraction = true;
        } finally {
            lock.unlock();
        }
    }

    /**
     * {@code torch.cuda.memory._set_allocator_settings}: re-parses {@code conf} over the current settings
     * ({@link AllocatorConfig#reparse}). New settings apply to later decisions; toggling expandable segments off
     * makes existing expandable blocks unusable for new requests until it is turned on again (allocator.md §5.5).
     *
     * @throws io.gpumem.config.ConfigException naming the bad key; the settings are then unchanged
     */
    public void setSettings(String conf) {
        lock.lock();
        try {
            core.setConfig(core.config.reparse(conf));
        } finally {
            lock.unlock();
        }
    }

    /**
     * Replaces the settings with an already-built configuration: the programmatic form of {@link #setSettings}
     * (for callers replaying a snapshot's {@code allocator_settings}). Same semantics: later decisions use it,
     * {@code max_split_size} in {@link #stats()} keeps its creation-time value.
     */
    public void setConfig(AllocatorConfig config) {
        Objects.requireNonNull(config, "config");
        lock.lock();
        try {
            core.setConfig(config);
        } finally {
            lock.unlock();
        }
    }

    // ---------------------------------------------------------------- statistics

    /**
     * {@code torch.cuda.memory_stats()} as a typed value. The figures are copied under the lock (two small array
     * copies, so allocating threads wait only that long) and the value is built after the lock is released.
     */
    @Override
    public MemoryStats stats() {
        DeviceStats copy;
        lock.lock();
        try {
            copy = core.stats.copy();
        } finally {
            lock.unlock();
        }
        return copy.toMemoryStats(core.maxSplitSizeAtCreation);
    }

    /** {@code torch.cuda.memory_summary(device, abbreviated)}: PyTorch's text table of {@link #stats()}. */
    public String memorySummary(boolean abbreviated) {
        return MemorySummary.format(stats().toPyTorchMap(), core.device.index(), abbreviated);
    }

    /** {@code torch.cuda.memory_allocated()}. */
    public long allocatedBytes() {
        lock.lock();
        try {
            return core.stats.current(DeviceStats.ALLOCATED_BYTES, DeviceStats.ALL);
        } finally {
            lock.unlock();
        }
    }

    /** {@code torch.cuda.memory_reserved()}. */
    public long reservedBytes() {
        lock.lock();
        try {
            return core.stats.current(DeviceStats.RESERVED_BYTES, DeviceStats.ALL);
        } finally {
            lock.unlock();
        }
    }

    /** {@code torch.cuda.reset_peak_memory_stats()}. */
    public void resetPeakStats() {
        lock.lock();
        try {
            core.stats.resetPeak();
        } finally {
            lock.unlock();
        }
    }

    /** {@code torch.cuda.reset_accumulated_memory_stats()}. */
    public void resetAccumulatedStats() {
        lock.lock();
        try {
            core.stats.resetAccumulated();
            core.accumulatedReset = true;
        } finally {
            lock.unlock();
        }
    }

    // ---------------------------------------------------------------- history and snapshots

    /** {@code torch.cuda.memory._record_memory_history(enabled, context, max_entries)}. */
    public void recordHistory(HistoryOptions options) {
        internals.recordHistory(options);
    }

    /**
     * Sets where stacks come from when history recording captures context: called at malloc (and at free with
     * context "all"). The CLI uses it to label allocations by name. {@code null} records no frames.
     */
    public void setContextSupplier(Supplier<List<Frame>> frames) {
        internals.setContextSupplier(frames);
    }

    /**
     * {@code torch.cuda.memory._snapshot()}: the trace so far, then the segments (which records a
     * {@code snapshot} entry that the next snapshot will show), then the settings.
     */
    @Override
    public MemorySnapshot snapshot() {
        lock.lock();
        try {
            return SnapshotBuilder.snapshot(core);
        } finally {
            lock.unlock();
        }
    }
}
