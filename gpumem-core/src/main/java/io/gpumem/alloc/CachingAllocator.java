package io.gpumem.alloc;

import io.gpumem.config.AllocatorConfig;
import io.gpumem.device.Device;
import io.gpumem.history.Frame;
import io.gpumem.history.HistoryOptions;
import io.gpumem.history.MemorySnapshot;
import io.gpumem.history.TraceEntry;
import io.gpumem.oom.OomReport;
import io.gpumem.oom.OutOfMemoryException;
import io.gpumem.stats.DeviceStats;
import io.gpumem.stats.MemorySummary;

import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.function.Consumer;
import java.util.function.LongSupplier;
import java.util.function.Supplier;

/**
 * PyTorch's native CUDA caching allocator ({@code DeviceCachingAllocator}, 2.5 era) over any {@link Device},
 * reproducing its decisions to the byte: the same segments, the same block addresses relative to the
 * segments, the same {@code memory_stats()} counters and the same memory-history trace, given the same
 * requests and the same device addresses. The behaviour is specified in
 * {@code docs/allocator.md}; the algorithms live in the package-private {@code AllocatorCore}.
 *
 * <h2>Use</h2>
 * {@link #malloc(long, long)} / {@link #free(long)} / {@link #recordStream(long, long)} /
 * {@link #emptyCache()} as in PyTorch; {@link #memoryStats()}, {@link #snapshot()} and
 * {@link #recordHistory(HistoryOptions)} for observation; {@link #checkInvariants()} verifies the internal
 * state (tests call it after every step).
 *
 * <h2>Thread safety</h2>
 * One lock per allocator (PyTorch also uses one recursive mutex per device). Every public method takes it. It is an
 * {@code AllocatorLock}: reentrant, with an uncontended cost of one compare-and-set plus one plain release store.
 *
 * <h2>Bad input</h2>
 * A negative size, or freeing / recording a stream on a pointer this allocator did not hand out or has already
 * freed, throws {@link IllegalArgumentException} naming the pointer in hex; the state is untouched.
 *
 * <h2>State import for replays</h2>
 * {@link #restoreSegment} rebuilds one segment of a recorded state, so a replay can start mid-trace. It takes
 * the segment's memory from the device exactly like a live allocation would ({@link Device#malloc} for a
 * classic segment; {@link Device#reserveAddressRange} plus one created, mapped and access-enabled page per
 * mapped page for an expandable one); an oracle device that hands out recorded addresses needs no special
 * allocator code. The blocks tile the segment in address order and must not put two free (or two unmapped)
 * blocks next to each other (PyTorch would have merged them). Stats become those of a process that made the
 * same allocations: segment, reserved, allocated, active, requested, inactive_split and oversize stats rise
 * (current, peak and allocated), the device-call counters and the trace do not.
 */
public final class CachingAllocator {
    private static final long ONE_EXABYTE = 1L << 60;

    private final AllocatorLock lock = new AllocatorLock();
    private final AllocatorCore core;

    public CachingAllocator(Device device) {
        this(device, AllocatorConfig.defaults());
    }

    public CachingAllocator(Device device, AllocatorConfig config) {
        this.core = new AllocatorCore(Objects.requireNonNull(device, "device"), Objects.requireNonNull(config, "config"));
    }

    /** The device this allocator draws memory from. */
    public Device device() {
        return core.device;
    }

    /** The configuration in effect (the latest {@link #setSettings} result). */
    public AllocatorConfig config() {
        return core.config;
    }

    // ---------------------------------------------------------------- allocation

    /** Allocates on the default stream (0). */
    public long malloc(long size) {
        return malloc(size, Device.DEFAULT_STREAM);
    }

    /**
     * Allocates {@code size} bytes for use on {@code stream}.
     *
     * @return the address; 0 for a zero-byte request (which touches nothing)
     * @throws OutOfMemoryException     when the device cannot provide the memory even after the cache is released,
     *                                  or the request is 1 EB or more
     * @throws IllegalArgumentException for a negative size
     */
    public long malloc(long size, long stream) {
        if (size < 0) {
            throw new IllegalArgumentException("malloc: negative size " + size);
        }
        if (size == 0) {
            return Device.NULL;
        }
        if (size >= ONE_EXABYTE) {
            throw exabyteOom(size);
        }
        lock.lock();
        try {
            Block b = core.malloc(size, stream);
            if (!core.allocatedBlocks.putIfAbsent(b.ptr, b)) {
                throw new IllegalStateException("the device handed out memory at 0x" + Long.toHexString(b.ptr)
                        + " that overlaps a live allocation; the allocator state is no longer trustworthy");
            }
            return b.ptr;
        } finally {
            lock.unlock();
        }
    }

    private OutOfMemoryException exabyteOom(long size) {
        lock.lock();
        try {
            return new OutOfMemoryException(new OomReport(size, 0, 0, core.device.index(), core.device.totalMemory(),
                    core.device.freeMemory(), core.setFraction ? core.allowedMemoryMaximum : -1,
                    core.stats.current(DeviceStats.ALLOCATED_BYTES, DeviceStats.ALL),
                    core.stats.current(DeviceStats.RESERVED_BYTES, DeviceStats.ALL), List.of(), true));
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
    public void free(long ptr) {
        if (ptr == Device.NULL) {
            return;
        }
        lock.lock();
        try {
            Block b = core.allocatedBlocks.remove(ptr);
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
    public void recordStream(long ptr, long stream) {
        if (ptr == Device.NULL) {
            return;
        }
        lock.lock();
        try {
            Block b = core.allocatedBlocks.get(ptr);
            if (b == null) {
                throw new IllegalArgumentException("recordStream: 0x" + Long.toHexString(ptr)
                        + " is not an allocated block of this allocator");
            }
            if (stream != b.stream) {
                b.addStreamUse(stream);
            }
        } finally {
            lock.unlock();
        }
    }

    /** {@code torch.cuda.empty_cache()}: waits for pending events, releases every whole free segment and free page. */
    public void emptyCache() {
        lock.lock();
        try {
            core.releaseCachedBlocks(core.trace.maybeGatherContext(TraceRecorder.ALL));
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
     * {@code max_split_size} in {@link #memoryStats()} keeps its creation-time value.
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

    /** {@code torch.cuda.memory_stats()}: sorted dotted keys, {@code max_split_size} −1 when unset. */
    public Map<String, Long> memoryStats() {
        lock.lock();
        try {
            return core.stats.toMap(core.maxSplitSizeAtCreation);
        } finally {
            lock.unlock();
        }
    }

    /** {@code torch.cuda.memory_summary(device, abbreviated)}: PyTorch's text table of {@link #memoryStats()}. */
    public String memorySummary(boolean abbreviated) {
        return MemorySummary.format(memoryStats(), core.device.index(), abbreviated);
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
        Objects.requireNonNull(options, "options");
        boolean enabled = options.enabled() != HistoryOptions.Enabled.NONE;
        int when = switch (options.context()) {
            case NONE -> TraceRecorder.NEVER;
            case STATE -> TraceRecorder.STATE;
            case ALLOC -> TraceRecorder.ALLOC;
            case ALL -> TraceRecorder.ALL;
        };
        long max = options.enabled() == HistoryOptions.Enabled.ALL ? options.maxEntries() : 1;
        lock.lock();
        try {
            core.trace.configure(enabled, max, when);
        } finally {
            lock.unlock();
        }
    }

    /**
     * Sets where stacks come from when history recording captures context: called at malloc (and at free with
     * context "all"). The CLI uses it to label allocations by name. {@code null} records no frames.
     */
    public void setContextSupplier(Supplier<List<Frame>> frames) {
        core.trace.contextSupplier = frames;
    }

    /** Sets the clock for {@code time_us} of trace entries (microseconds); tests inject a deterministic one. */
    public void setClock(LongSupplier timeMicros) {
        core.trace.clockMicros = Objects.requireNonNull(timeMicros, "timeMicros");
    }

    /** Attaches a listener that sees every trace entry as it is recorded, even with history off. */
    public void attachTraceTracker(Consumer<TraceEntry> tracker) {
        core.trace.addTracker(Objects.requireNonNull(tracker, "tracker"));
    }

    /** Detaches a listener; returns whether it was attached. */
    public boolean detachTraceTracker(Consumer<TraceEntry> tracker) {
        return core.trace.removeTracker(tracker);
    }

    /**
     * {@code torch.cuda.memory._snapshot()}: the trace so far, then the segments (which records a
     * {@code snapshot} entry that the next snapshot will show), then the settings.
     */
    public MemorySnapshot snapshot() {
        lock.lock();
        try {
            return SnapshotWriter.snapshot(core);
        } finally {
            lock.unlock();
        }
    }

    // ---------------------------------------------------------------- state import

    /**
     * Rebuilds one segment of a recorded allocator state (see the class comment).
     *
     * @param address    where the segment must live; the device must return exactly this address, or pass
     *                   {@link Device#NULL} to accept whatever the device returns
     * @param totalSize  segment size (classic) or reservation size (expandable, a multiple of the page size; 0
     *                   means PyTorch's default reservation for this device); must equal the blocks' total
     * @param stream     allocation stream of the segment and all its blocks
     * @param small      small pool (else large)
     * @param expandable an expandable segment (2 MiB pages small, 20 MiB large) instead of a cudaMalloc'd one
     * @param blocks     the blocks in address order; for expandable segments unmapped blocks must start and end
     *                   on page boundaries
     * @return the segment's base address
     * @throws IllegalArgumentException when the blocks are inconsistent or the device put the segment elsewhere;
     *                                  nothing is changed then
     */
    public long restoreSegment(long address, long totalSize, long stream, boolean small, boolean expandable,
                               List<RestoredBlock> blocks) {
        lock.lock();
        try {
            return StateImporter.restore(core, address, totalSize, stream, small, expandable, blocks);
        } finally {
            lock.unlock();
        }
    }

    // ---------------------------------------------------------------- checking

    /**
     * Verifies every structural invariant and every stat against its recomputation from the block graph.
     *
     * @throws IllegalStateException listing every violation found
     */
    public void checkInvariants() {
        lock.lock();
        try {
            InvariantChecker.check(core);
        } finally {
            lock.unlock();
        }
    }

    /** Number of blocks waiting on stream events (freed by the user, not yet reusable). */
    public int pendingFreeBlocks() {
        lock.lock();
        try {
            return SnapshotWriter.pendingBlocks(core).size();
        } finally {
            lock.unlock();
        }
    }

    /**
     * Size of the block serving a live allocation (the rounded request, or more when a remainder was too small
     * to split), or −1 when {@code ptr} is not allocated here.
     */
    public long blockSize(long ptr) {
        lock.lock();
        try {
            Block b = core.allocatedBlocks.get(ptr);
            return b == null ? -1 : b.size;
        } finally {
            lock.unlock();
        }
    }
}
