package io.gpumem.device;

import java.util.EnumMap;
import java.util.concurrent.atomic.AtomicLongArray;
import org.jspecify.annotations.Nullable;

/**
 * The simulated device's fault injection and call counters: how many times each {@link DeviceOp} was called,
 * and which call of an operation must fail with which {@link DeviceError}.
 *
 * <p>Invariant: at most one pending fault per operation; a pending fault's countdown is at least 1. Counters
 * are atomic (read without the device's monitor); faults are used under it.
 */
final class FaultPlan {
    /** A planned failure: the {@code remaining}-th next call fails with {@code error}. */
    private static final class PendingFault {
        int remaining;
        final DeviceError error;

        PendingFault(int remaining, DeviceError error) {
            this.remaining = remaining;
            this.error = error;
        }
    }

    private final AtomicLongArray calls = new AtomicLongArray(DeviceOp.values().length);
    private final EnumMap<DeviceOp, PendingFault> faults = new EnumMap<>(DeviceOp.class);

    /** A copy with the same call counts; refused while an injected fault is pending (its owner is a test). */
    FaultPlan copy() {
        if (!faults.isEmpty()) {
            throw new IllegalStateException("cannot copy a device with injected faults pending");
        }
        FaultPlan c = new FaultPlan();
        for (int i = 0; i < calls.length(); i++) {
            c.calls.set(i, calls.get(i));
        }
        return c;
    }

    void count(DeviceOp op) {
        calls.incrementAndGet(op.ordinal());
    }

    long callCount(DeviceOp op) {
        return calls.get(op.ordinal());
    }

    void failNth(DeviceOp op, int n, DeviceError error) {
        if (n < 1) {
            throw new IllegalArgumentException("n must be >= 1, got " + n);
        }
        faults.put(op, new PendingFault(n, error));
    }

    /**
     * Consumes a due fault for an operation that reports running out of memory as a result: true when this call
     * must return {@link Device#NULL}; any other due error is thrown.
     */
    boolean outOfMemoryDue(DeviceOp op) {
        DeviceError e = due(op);
        if (e == null) {
            return false;
        }
        if (e == DeviceError.CUDA_ERROR_OUT_OF_MEMORY) {
            return true;
        }
        throw new DeviceException(op, e, "injected fault");
    }

    /** Consumes a due fault and throws it. */
    void throwIfDue(DeviceOp op) {
        DeviceError e = due(op);
        if (e != null) {
            throw new DeviceException(op, e, "injected fault");
        }
    }

    private @Nullable DeviceError due(DeviceOp op) {
        PendingFault f = faults.get(op);
        if (f == null || --f.remaining > 0) {
            return null;
        }
        faults.remove(op);
        return f.error;
    }
}
