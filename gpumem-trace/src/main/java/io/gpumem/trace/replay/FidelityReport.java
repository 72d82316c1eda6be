package io.gpumem.trace.replay;

import java.util.List;

/** Fidelity of an oracle replay of every device trace of a file, with totals over devices. */
public record FidelityReport(String trace, List<DeviceFidelity> devices, List<String> notes) {

    public long allocs() {
        return devices.stream().mapToLong(DeviceFidelity::allocs).sum();
    }

    public long exact() {
        return devices.stream().mapToLong(DeviceFidelity::exact).sum();
    }

    public long segmentEvents() {
        return devices.stream().mapToLong(DeviceFidelity::segmentEvents).sum();
    }

    public long segmentMatched() {
        return devices.stream().mapToLong(DeviceFidelity::segmentMatched).sum();
    }

    public long entries() {
        return devices.stream().mapToLong(DeviceFidelity::entries).sum();
    }

    /** The first mismatch over devices (in device order), or {@code null}. */
    public Mismatch firstMismatch() {
        for (DeviceFidelity d : devices) {
            if (d.firstMismatch() != null) {
                return d.firstMismatch();
            }
        }
        return null;
    }

    public boolean isExact() {
        return devices.stream().allMatch(DeviceFidelity::isExact);
    }
}
