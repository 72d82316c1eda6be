package io.gpumem.spill;

import io.gpumem.alloc.AddressTable;
import io.gpumem.alloc.GpuAllocator;
import io.gpumem.alloc.GpuAllocatorInternals;
import io.gpumem.device.Device;
import io.gpumem.history.MemorySnapshot;
import io.gpumem.oom.OomReport;
import io.gpumem.oom.OutOfMemoryException;
import io.gpumem.stats.MemoryStats;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Objects;

/**
 * Spill on out-of-memory, for any allocator policy: a {@link GpuAllocator} decorator with a registry of
 * {@link SpillableBuffer}s, after RMM's {@code failure_callback_resource_adaptor} and Spark RAPIDS' spill
 * framework. When the wrapped allocator throws {@link OutOfMemoryException}, the registry moves the unpinned
 * spillable buffer of lowest priority (least recently used among equals) off the device, to host memory
 * while the host budget lasts and then to a file under the spill directory, and the allocation is
 * retried; one buffer per retry, so no more is spilled than needed. If nothing is left to spill, or no spilling
 * could serve the request (refused outright at 1 EB, or larger than all the memory the process can reach), the
 * original out-of-memory error is thrown. The wrapped allocator is not changed: its PyTorch-exact behaviour and
 * statistics stay its own (each failed attempt is one OOM in its counters, as a caught-and-retried OOM
 * is in PyTorch).
 *
 * <p>Spilled buffers come back on {@link SpillableBuffer#acquire()}; plain {@link #malloc} allocations are
 * never moved. Thread-safe: every operation holds this object's monitor (spills and copies included),
 * so a spill never races a buffer's use.
 */
public final class SpillingAllocator implements GpuAllocator {
    private final GpuAllocator upstream;
    private final Device device;
    private final long hostBudget;
    private final Path spillDir;
    /** False: accounting only, for simulated devices without byte backing; spills move and store no bytes. */
    private final boolean moveBytes;

    private final Map<Long, SpillableBuffer> buffers = new LinkedHashMap<>();
    /**
     * The device-resident spillable buffers by address: the memory a plain {@link #free} must not release (the buffer
     * would later free its stale address again, whoever holds it by then).
     */
    private final AddressTable<SpillableBuffer> onDevice = AddressTable.forObjects();

    private long nextId;
    private long clock;
    private long hostUsed;
    private long oomRetries;
    private long spillsToHost;
    private long spillsToDisk;
    private long bytesToHost;
    private long bytesToDisk;
    private long unspills;
    private long bytesUnspilled;
    private long spillNanos;
    private long unspillNanos;

    /**
     * @param upstream the allocator that owns the device memory
     * @param hostBudgetBytes host memory spilled buffers may use (off-heap)
     * @param spillDir where buffers go once the host budget is spent (null: host only)
     */
    public SpillingAllocator(GpuAllocator upstream, long hostBudgetBytes, Path spillDir) {
        this(upstream, hostBudgetBytes, spillDir, true);
    }

    /**
     * A spilling allocator that only accounts: buffers leave and re-enter the device (so allocations
     * succeed as they would with real spilling) but no bytes are copied or stored, host or disk. For
     * what-if runs on a simulated device without byte backing, where the tensors have no contents;
     * "disk" is then unlimited.
     */
    public static SpillingAllocator accountingOnly(GpuAllocator upstream, long hostBudgetBytes) {
        return new SpillingAllocator(upstream, hostBudgetBytes, Path.of("."), false);
    }

    private SpillingAllocator(GpuAllocator upstream, long hostBudgetBytes, Path spillDir, boolean moveBytes) {
        this.moveBytes = moveBytes;
        if (hostBudgetBytes < 0) {
            throw new IllegalArgumentException("host spill budget must not be negative, got " + hostBudgetBytes);
        }
        this.upstream = upstream;
        this.device = upstream.device();
        this.hostBudget = hostBudgetBytes;
        this.spillDir = spillDir;
    }

    /** Allocates, spilling registered buffers and retrying when the device is out of memory. */
    @Override
    public synchronized long malloc(long sizeBytes, long streamId) {
        while (true) {
            try {
                return upstream.malloc(sizeBytes, streamId);
            } catch (OutOfMemoryException oom) {
                if (!spillingCouldServe(oom.report()) || spillOneMore() == 0) {
                    throw oom;
                }
                oomRetries++;
            }
        }
    }

    /**
     * Whether freeing device memory could let the failed request through: not for a request refused outright (1 EB or
     * more, which touches nothing), nor for one larger than all the memory this process can reach (what the device
     * has free plus what the allocator holds, or the fraction's limit), which spilling every buffer would not make.
     */
    private static boolean spillingCouldServe(OomReport r) {
        if (r.moreThanOneExabyte()) {
            return false;
        }
        long reachable = r.deviceFree() + r.reservedBytes();
        if (r.fractionSet()) {
            reachable = Math.min(reachable, r.allowedMaximum());
        }
        return r.roundedSize() <= reachable;
    }

    /** Allocates a spillable buffer (on the device, unpinned) with a spill priority (lower spills first). */
    public synchronized SpillableBuffer allocateSpillable(long sizeBytes, int priority) {
        if (sizeBytes <= 0) {
            throw new IllegalArgumentException("a spillable buffer needs a positive size, got " + sizeBytes);
        }
        long address = malloc(sizeBytes, Device.DEFAULT_STREAM);
        SpillableBuffer b = new SpillableBuffer(this, nextId++, sizeBytes, priority, address);
        b.lastUse = ++clock;
        buffers.put(b.id, b);
        onDevice.put(address, b);
        return b;
    }

    /**
     * Spills the unpinned device-resident buffer of lowest priority (least recently used among equals)
     * that has somewhere to go. One at a time, retrying the allocation after each, so no more is spilled
     * than the allocation needs.
     *
     * @return bytes freed on the device (0: nothing could be spilled)
     */
    private long spillOneMore() {
        SpillableBuffer best = null;
        for (SpillableBuffer b : buffers.values()) {
            if (b.address != 0
                    && b.pins == 0
                    && (hostUsed + b.size <= hostBudget || spillDir != null)
                    && (best == null
                            || b.priority < best.priority
                            || (b.priority == best.priority && b.lastUse < best.lastUse))) {
                best = b;
            }
        }
        if (best == null) {
            return 0;
        }
        long t0 = System.nanoTime();
        spillOne(best);
        spillNanos += System.nanoTime() - t0;
        return best.size;
    }

    /** Moves one buffer off the device; false when neither the host budget nor a spill directory can take it. */
    private boolean spillOne(SpillableBuffer b) {
        if (hostUsed + b.size <= hostBudget || spillDir == null) {
            if (hostUsed + b.size > hostBudget) {
                return false;
            }
            if (!moveBytes) {
                b.host = MemorySegment.NULL;
                hostUsed += b.size;
                spillsToHost++;
                bytesToHost += b.size;
                leaveDevice(b);
                return true;
            }
            // The arena outlives this method: the buffer owns it from here (unspill and close close it), so it
            // cannot sit in a try-with-resources; it is closed here only when the copy fails.
            @SuppressWarnings("MustBeClosedChecker")
            Arena arena = Arena.ofShared();
            MemorySegment host;
            try {
                host = arena.allocate(b.size, 64);
                device.copyToHost(host, b.address, b.size);
            } catch (RuntimeException | Error e) {
                arena.close();
                throw e;
            }
            b.hostArena = arena;
            b.host = host;
            hostUsed += b.size;
            spillsToHost++;
            bytesToHost += b.size;
        } else if (!moveBytes) {
            b.file = spillDir.resolve("spill-" + b.id + ".bin"); // never written
            spillsToDisk++;
            bytesToDisk += b.size;
        } else {
            Path file = spillDir.resolve("spill-" + b.id + ".bin");
            try (Arena staging = Arena.ofConfined()) {
                MemorySegment bytes = staging.allocate(b.size, 64);
                device.copyToHost(bytes, b.address, b.size);
                Files.createDirectories(spillDir);
                try (FileChannel ch = FileChannel.open(
                        file,
                        StandardOpenOption.CREATE,
                        StandardOpenOption.WRITE,
                        StandardOpenOption.TRUNCATE_EXISTING)) {
                    ByteBuffer buf = bytes.asByteBuffer();
                    while (buf.hasRemaining()) {
                        ch.write(buf);
                    }
                }
            } catch (IOException e) {
                throw new UncheckedIOException("cannot spill " + b.size + " bytes to " + file, e);
            }
            b.file = file;
            spillsToDisk++;
            bytesToDisk += b.size;
        }
        leaveDevice(b);
        return true;
    }

    /** Gives a device-resident buffer's memory back to the wrapped allocator. */
    private void leaveDevice(SpillableBuffer b) {
        onDevice.remove(b.address);
        upstream.free(b.address);
        b.address = 0;
    }

    synchronized long acquire(SpillableBuffer b) {
        if (b.closed) {
            throw new IllegalStateException("spillable buffer " + b.id + " is closed");
        }
        if (b.address == 0) {
            b.pins++; // not a spill candidate while it comes back
            try {
                long address = malloc(b.size, Device.DEFAULT_STREAM);
                long t0 = System.nanoTime();
                if (!moveBytes) {
                    hostUsed -= b.host != null ? b.size : 0;
                    b.host = null;
                    b.file = null;
                } else if (b.host != null) {
                    device.copyToDevice(address, b.host, b.size);
                    Objects.requireNonNull(b.hostArena, "a host copy comes with its arena")
                            .close();
                    b.hostArena = null;
                    b.host = null;
                    hostUsed -= b.size;
                } else {
                    try (Arena staging = Arena.ofConfined()) {
                        MemorySegment bytes = staging.allocate(b.size, 64);
                        try (FileChannel ch = FileChannel.open(b.file, StandardOpenOption.READ)) {
                            ByteBuffer buf = bytes.asByteBuffer();
                            while (buf.hasRemaining()) {
                                if (ch.read(buf) < 0) {
                                    throw new IOException(
                                            "spill file " + b.file + " is shorter than " + b.size + " bytes");
                                }
                            }
                        }
                        device.copyToDevice(address, bytes, b.size);
                        Files.deleteIfExists(b.file);
                    } catch (IOException e) {
                        upstream.free(address);
                        throw new UncheckedIOException("cannot read spilled buffer back from " + b.file, e);
                    }
                    b.file = null;
                }
                b.address = address;
                onDevice.put(address, b);
                unspills++;
                bytesUnspilled += b.size;
                unspillNanos += System.nanoTime() - t0;
            } finally {
                b.pins--;
            }
        }
        b.pins++;
        b.lastUse = ++clock;
        return b.address;
    }

    synchronized void release(SpillableBuffer b) {
        if (b.pins <= 0) {
            throw new IllegalStateException("spillable buffer " + b.id + " released more often than acquired");
        }
        b.pins--;
    }

    synchronized void close(SpillableBuffer b) {
        if (b.closed) {
            return;
        }
        b.closed = true;
        buffers.remove(b.id);
        if (b.address != 0) {
            leaveDevice(b);
        } else if (b.host != null) {
            if (b.hostArena != null) {
                b.hostArena.close();
            }
            b.host = null;
            hostUsed -= b.size;
        } else if (b.file != null && moveBytes) {
            try {
                Files.deleteIfExists(b.file);
            } catch (IOException e) {
                throw new UncheckedIOException("cannot delete spill file " + b.file, e);
            }
        }
    }

    public synchronized SpillStats spillStats() {
        return new SpillStats(
                oomRetries,
                spillsToHost,
                spillsToDisk,
                bytesToHost,
                bytesToDisk,
                unspills,
                bytesUnspilled,
                spillNanos,
                unspillNanos);
    }

    /** Host bytes held by spilled buffers now. */
    public synchronized long hostBytesUsed() {
        return hostUsed;
    }

    /**
     * Frees a plain {@link #malloc} allocation.
     *
     * @throws IllegalArgumentException for the memory of a spillable buffer, which only {@link SpillableBuffer#close()}
     *     frees (freed here, the buffer would free its address again later, by then perhaps another allocation's)
     */
    @Override
    public synchronized void free(long address) {
        SpillableBuffer b = address == 0 ? null : onDevice.get(address);
        if (b != null) {
            throw new IllegalArgumentException("free: 0x" + Long.toHexString(address) + " is the memory of spillable"
                    + " buffer " + b.id + ", which only closing the buffer frees");
        }
        upstream.free(address);
    }

    @Override
    public synchronized void recordStream(long address, long streamId) {
        upstream.recordStream(address, streamId);
    }

    @Override
    public synchronized void emptyCache() {
        upstream.emptyCache();
    }

    @Override
    public synchronized MemoryStats stats() {
        return upstream.stats();
    }

    @Override
    public synchronized MemorySnapshot snapshot() {
        return upstream.snapshot();
    }

    /** The wrapped allocator's internals: the history and invariants are its own (spilling keeps no history). */
    @Override
    public GpuAllocatorInternals internals() {
        return upstream.internals();
    }

    @Override
    public Device device() {
        return device;
    }

    /** Frees every spillable buffer (device, host or disk) and closes the wrapped allocator. */
    @Override
    public synchronized void close() {
        for (SpillableBuffer b : new ArrayList<>(buffers.values())) {
            close(b);
        }
        upstream.close();
    }
}
