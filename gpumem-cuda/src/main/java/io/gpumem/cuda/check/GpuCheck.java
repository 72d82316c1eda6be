package io.gpumem.cuda.check;

import io.gpumem.alloc.CachingAllocator;
import io.gpumem.config.AllocatorConfig;
import io.gpumem.cuda.CudaDevice;
import io.gpumem.cuda.driver.CudaUnavailableException;
import io.gpumem.device.DeviceException;
import io.gpumem.device.DeviceOp;
import java.io.PrintStream;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Deque;
import java.util.List;
import java.util.Locale;
import java.util.Random;

/**
 * The real-GPU check behind {@code scripts/gpu-check.sh}: a short run (well under three minutes) that shows
 * gpumem's caching allocator on an actual device, printing numbers a reader can compare against
 * {@code nvidia-smi}.
 *
 * <ol>
 *   <li>The device: name, driver, total and free memory, virtual memory support and granularity.</li>
 *   <li>A training-like workload (weights, then steps of forward activations, backward gradients and an
 *       optimizer state) in both modes, native segments and {@code expandable_segments:True}, printing
 *       after each step the allocator's reserved bytes against the drop in {@code cuMemGetInfo}'s free
 *       bytes since the start. The two agree up to what the driver itself rounds or keeps.</li>
 *   <li>Expandable segments growing page by page and being returned by {@code emptyCache}, with the driver
 *       calls it took.</li>
 *   <li>The cost of {@code cuMemAlloc}+{@code cuMemFree} against a cached {@code malloc}+{@code free} of the
 *       same size (a rough wall-clock figure, not a benchmark; gpumem-bench has the JMH ones).</li>
 * </ol>
 *
 * The workload is scaled to a budget (a fraction of free memory, capped), and its sizes come from a seeded
 * generator whose seed is printed, so a run can be repeated. Exit status: 0 when every section ran and
 * everything was given back, 1 when something did not add up, 2 when there is no usable driver (or a bad option), 3
 * when a driver call failed during the check (one line naming the call, as gpumem's commands report errors).
 */
public final class GpuCheck {
    private static final long MiB = 1L << 20;
    private static final long GiB = 1L << 30;

    private static final AllocatorConfig EXPANDABLE = AllocatorConfig.defaults().toBuilder()
            .raw("expandable_segments:True")
            .expandableSegments(true)
            .build();

    private final CudaDevice device;
    private final PrintStream out;
    private final long budget;
    private final long seed;
    /** Run after the weights are allocated in each workload; nothing unless a test disturbs the device there. */
    private Runnable afterWeights = () -> {};

    private boolean ok = true;

    GpuCheck(CudaDevice device, PrintStream out, long budget, long seed) {
        this.device = device;
        this.out = out;
        this.budget = budget;
        this.seed = seed;
    }

    /** Runs {@code hook} after the weights are allocated in each workload (tests use it to disturb the device). */
    GpuCheck afterWeights(Runnable hook) {
        afterWeights = hook;
        return this;
    }

    public static void main(String[] args) {
        System.exit(exitStatus(args, System.out, System.err));
    }

    /** Thrown by {@link #number} for a bad option; {@link #exitStatus} prints it and returns 2. */
    private static final class BadOption extends RuntimeException {
        BadOption(String message) {
            super(message, null, false, false);
        }
    }

    /**
     * The check for {@code args}, printing to {@code out} and {@code err}; returns the exit status (see the class
     * comment): a driver call that fails during the check is 3 with one line naming it, not a stack trace and not
     * the 1 of a check that did not add up.
     */
    static int exitStatus(String[] args, PrintStream out, PrintStream err) {
        int ordinal = 0;
        long cap = 8 * GiB;
        long seed = 20240607L;
        try {
            for (int i = 0; i < args.length; i++) {
                switch (args[i]) {
                    case "--device" -> ordinal = (int) number(args, ++i, 0, Integer.MAX_VALUE);
                    case "--budget-mib" -> cap = number(args, ++i, 16, 1L << 30) * MiB;
                    case "--seed" -> seed = number(args, ++i, Long.MIN_VALUE, Long.MAX_VALUE);
                    default ->
                        throw new BadOption(
                                "unknown argument '" + args[i] + "' (accepted: --device N, --budget-mib M, --seed S)");
                }
            }
        } catch (BadOption e) {
            err.println("gpu-check: " + e.getMessage());
            return 2;
        }
        CudaDevice device;
        try {
            device = CudaDevice.open(CudaDevice.configuredLibrary(), ordinal);
        } catch (CudaUnavailableException e) {
            err.println("gpu-check: no usable CUDA driver: " + e.getMessage());
            return 2;
        }
        try (device) {
            long budget = Math.min(cap, device.freeMemory() * 2 / 5) / (2 * MiB) * (2 * MiB);
            return new GpuCheck(device, out, budget, seed).run() ? 0 : 1;
        } catch (DeviceException e) {
            out.flush();
            err.println("gpu-check: a driver call failed during the check, which stopped there: " + e.getMessage());
            return 3;
        }
    }

    /** The value after option {@code args[i - 1]}, as a number in [min, max]; a {@link BadOption} otherwise. */
    private static long number(String[] args, int i, long min, long max) {
        String option = args[i - 1];
        if (i >= args.length) {
            throw new BadOption(option + " needs a value");
        }
        try {
            long value = Long.parseLong(args[i].trim());
            if (value >= min && value <= max) {
                return value;
            }
        } catch (NumberFormatException e) {
            // reported below
        }
        throw new BadOption(option + " takes a whole number from " + min + " to " + max + ", got '" + args[i] + "'");
    }

    /** Runs every section; returns whether all of them added up. */
    boolean run() {
        long started = System.nanoTime();
        describeDevice();
        trainingWorkload("native segments", AllocatorConfig.defaults());
        trainingWorkload("expandable_segments:True", EXPANDABLE);
        expandableGrowAndReturn();
        allocationCost();
        out.printf(Locale.ROOT, "%nresult: %s in %.1f s%n", ok ? "PASS" : "FAIL", (System.nanoTime() - started) / 1e9);
        return ok;
    }

    // ---------------------------------------------------------------- sections

    private void describeDevice() {
        out.println("== gpumem GPU check ==");
        out.printf(Locale.ROOT, "device:          %s (ordinal %d)%n", device.name(), device.index());
        out.printf(
                Locale.ROOT,
                "driver:          %s, CUDA %d.%d%n",
                device.library(),
                device.driverVersion() / 1000,
                device.driverVersion() % 1000 / 10);
        out.printf(
                Locale.ROOT,
                "memory:          total %s, free %s%n",
                size(device.totalMemory()),
                size(device.freeMemory()));
        out.printf(
                Locale.ROOT,
                "virtual memory:  %s, granularity %s%n",
                device.supportsVirtualMemory() ? "supported" : "NOT supported (expandable falls back to cuMemAlloc)",
                size(device.allocationGranularity()));
        out.printf(Locale.ROOT, "workload budget: %s, seed=%d%n", size(budget), seed);
    }

    /**
     * Weights, then steps of forward (activations of a varying "sequence length"), backward (activations
     * freed in reverse while gradients are produced) and an optimizer update with a two-slot state.
     */
    private void trainingWorkload(String mode, AllocatorConfig config) {
        out.printf(Locale.ROOT, "%n-- training-like workload, %s --%n", mode);
        out.printf(
                Locale.ROOT,
                "%-10s %12s %12s %14s %12s%n",
                "phase",
                "allocated",
                "reserved",
                "cuMemGetInfo Δ",
                "Δ - reserved");
        long free0 = device.freeMemory();
        CachingAllocator allocator = new CachingAllocator(device, config);
        Random random = new Random(seed);
        int layers = 12;
        long weightBytes = budget / 8 / layers;
        List<Long> weights = new ArrayList<>();
        List<Long> optimizerState = new ArrayList<>();
        for (int l = 0; l < layers; l++) {
            weights.add(allocator.malloc(jitter(random, weightBytes)));
        }
        report(allocator, free0, "weights");
        afterWeights.run();
        long maxDelta = 0;
        for (int step = 1; step <= 6; step++) {
            double sequence = 0.4 + 0.6 * random.nextDouble();
            Deque<Long> activations = new ArrayDeque<>();
            for (int l = 0; l < layers; l++) {
                long perLayer = (long) (budget * 0.35 / layers * sequence);
                activations.push(allocator.malloc(jitter(random, perLayer * 2 / 3)));
                activations.push(allocator.malloc(jitter(random, perLayer / 3)));
                activations.push(allocator.malloc(jitter(random, 512 * 1024)));
            }
            List<Long> gradients = new ArrayList<>();
            while (!activations.isEmpty()) {
                long scratch = allocator.malloc(jitter(random, weightBytes / 4));
                allocator.free(activations.pop());
                allocator.free(scratch);
                if (activations.size() % 3 == 0) {
                    gradients.add(allocator.malloc(weightBytes));
                }
            }
            if (optimizerState.isEmpty()) {
                for (int l = 0; l < layers; l++) {
                    optimizerState.add(allocator.malloc(weightBytes));
                    optimizerState.add(allocator.malloc(weightBytes));
                }
            }
            for (long g : gradients) {
                allocator.free(g);
            }
            maxDelta = Math.max(maxDelta, report(allocator, free0, "step " + step));
        }
        weights.forEach(allocator::free);
        optimizerState.forEach(allocator::free);
        report(allocator, free0, "freed");
        allocator.emptyCache();
        long left = report(allocator, free0, "emptyCache");
        allocator.internals().checkInvariants();
        if (allocator.reservedBytes() != 0 || left > 64 * MiB) {
            fail("after emptyCache the allocator reserves " + size(allocator.reservedBytes())
                    + " and the driver still shows " + size(left) + " in use");
        }
        out.printf(Locale.ROOT, "peak driver use %s of budget %s%n", size(maxDelta), size(budget));
    }

    private void expandableGrowAndReturn() {
        out.printf(Locale.ROOT, "%n-- expandable segments: growing and being returned --%n");
        if (!device.supportsVirtualMemory()) {
            out.println("skipped: the device has no virtual memory management, expandable segments use cuMemAlloc");
            return;
        }
        long free0 = device.freeMemory();
        CachingAllocator allocator = new CachingAllocator(device, EXPANDABLE);
        long maps0 = device.callCount(DeviceOp.MAP);
        long creates0 = device.callCount(DeviceOp.CREATE_PHYSICAL);
        long reserves0 = device.callCount(DeviceOp.RESERVE_ADDRESS);
        List<Long> blocks = new ArrayList<>();
        long chunk = Math.max(30 * MiB, budget / 16) / MiB * MiB;
        out.printf(
                Locale.ROOT, "%-12s %12s %14s %8s %8s%n", "", "reserved", "cuMemGetInfo Δ", "cuMemMap", "cuMemCreate");
        long lastReserved = 0;
        for (int i = 1; i <= 6; i++) {
            blocks.add(allocator.malloc(chunk));
            long reserved = allocator.reservedBytes();
            out.printf(
                    Locale.ROOT,
                    "%-12s %12s %14s %8d %8d%n",
                    "malloc #" + i,
                    size(reserved),
                    size(free0 - device.freeMemory()),
                    device.callCount(DeviceOp.MAP) - maps0,
                    device.callCount(DeviceOp.CREATE_PHYSICAL) - creates0);
            if (reserved <= lastReserved) {
                fail("reserved bytes did not grow at malloc #" + i);
            }
            lastReserved = reserved;
        }
        long segments = device.callCount(DeviceOp.RESERVE_ADDRESS) - reserves0;
        out.printf(Locale.ROOT, "address ranges reserved: %d (growth maps pages into the same range)%n", segments);
        long unmaps0 = device.callCount(DeviceOp.UNMAP);
        long addressFrees0 = device.callCount(DeviceOp.FREE_ADDRESS);
        long releases0 = device.callCount(DeviceOp.RELEASE_PHYSICAL);
        for (int i = 0; i < blocks.size(); i += 2) {
            allocator.free(blocks.get(i));
        }
        allocator.emptyCache();
        out.printf(
                Locale.ROOT,
                "%-12s %12s %14s   cuMemUnmap %d, cuMemRelease %d%n",
                "free half+emptyCache",
                size(allocator.reservedBytes()),
                size(free0 - device.freeMemory()),
                device.callCount(DeviceOp.UNMAP) - unmaps0,
                device.callCount(DeviceOp.RELEASE_PHYSICAL) - releases0);
        for (int i = 1; i < blocks.size(); i += 2) {
            allocator.free(blocks.get(i));
        }
        allocator.emptyCache();
        long left = free0 - device.freeMemory();
        out.printf(
                Locale.ROOT,
                "%-12s %12s %14s   cuMemUnmap %d, cuMemRelease %d, cuMemAddressFree %d%n",
                "free all+emptyCache",
                size(allocator.reservedBytes()),
                size(left),
                device.callCount(DeviceOp.UNMAP) - unmaps0,
                device.callCount(DeviceOp.RELEASE_PHYSICAL) - releases0,
                device.callCount(DeviceOp.FREE_ADDRESS) - addressFrees0);
        allocator.internals().checkInvariants();
        if (allocator.reservedBytes() != 0 || left > 64 * MiB) {
            fail("expandable memory was not returned: reserved " + size(allocator.reservedBytes()) + ", driver "
                    + size(left));
        }
    }

    private void allocationCost() {
        out.printf(Locale.ROOT, "%n-- cost of an allocation (wall clock, after warm-up) --%n");
        CachingAllocator allocator = new CachingAllocator(device);
        for (long bytes : new long[] {MiB, 64 * MiB}) {
            int driverRounds = 300;
            for (int i = 0; i < 20; i++) {
                device.free(device.malloc(bytes));
            }
            long t0 = System.nanoTime();
            for (int i = 0; i < driverRounds; i++) {
                long p = device.malloc(bytes);
                device.free(p);
            }
            double driverNs = (System.nanoTime() - t0) / (double) driverRounds;
            int cachedRounds = 200_000;
            for (int i = 0; i < 20_000; i++) {
                allocator.free(allocator.malloc(bytes));
            }
            long t1 = System.nanoTime();
            for (int i = 0; i < cachedRounds; i++) {
                allocator.free(allocator.malloc(bytes));
            }
            double cachedNs = (System.nanoTime() - t1) / (double) cachedRounds;
            out.printf(
                    Locale.ROOT,
                    "%8s: cuMemAlloc+cuMemFree %10.1f us   cached malloc+free %8.3f us   (%.0fx)%n",
                    size(bytes),
                    driverNs / 1000,
                    cachedNs / 1000,
                    driverNs / cachedNs);
        }
        allocator.emptyCache();
    }

    // ---------------------------------------------------------------- helpers

    private long report(CachingAllocator allocator, long free0, String phase) {
        long delta = free0 - device.freeMemory();
        long reserved = allocator.reservedBytes();
        out.printf(
                Locale.ROOT,
                "%-10s %12s %12s %14s %12s%n",
                phase,
                size(allocator.allocatedBytes()),
                size(reserved),
                size(delta),
                signedSize(delta - reserved));
        if (delta < reserved) {
            fail(phase + ": the driver shows less memory in use (" + size(delta) + ") than the allocator reserves ("
                    + size(reserved) + ")");
        }
        return delta;
    }

    private void fail(String why) {
        ok = false;
        out.println("FAIL: " + why);
    }

    private static long jitter(Random random, long bytes) {
        return Math.max(512, (long) (bytes * (0.75 + 0.5 * random.nextDouble())));
    }

    static String size(long bytes) {
        if (Math.abs(bytes) >= GiB) {
            return String.format(Locale.ROOT, "%.2f GiB", bytes / (double) GiB);
        }
        return String.format(Locale.ROOT, "%.1f MiB", bytes / (double) MiB);
    }

    private static String signedSize(long bytes) {
        return (bytes > 0 ? "+" : "") + size(bytes);
    }
}
