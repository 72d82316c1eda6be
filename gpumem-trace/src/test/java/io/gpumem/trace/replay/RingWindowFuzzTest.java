package io.gpumem.trace.replay;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpumem.alloc.CachingAllocator;
import io.gpumem.config.AllocatorConfig;
import io.gpumem.device.SimulatedDevice;
import io.gpumem.history.HistoryOptions;
import io.gpumem.history.MemorySnapshot;
import io.gpumem.trace.io.AllocatorSnapshots;
import io.gpumem.trace.io.TraceSnapshot;
import java.util.ArrayList;
import java.util.List;
import java.util.SplittableRandom;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * Recordings made by gpumem's own allocator with a small history ring (so the window starts mid-run, with blocks
 * allocated before it freed inside it), on several streams with {@code record_stream}, {@code empty_cache()} and
 * several devices: the oracle replay of such a recording must be exact, since the recording's decisions are the
 * exact allocator's own. On a difference the segments that differ are printed. Seeded; the seed is printed.
 */
class RingWindowFuzzTest {

    private static final long MiB = 1L << 20;

    @ParameterizedTest
    @ValueSource(
            strings = {
                "",
                "max_split_size_mb:40",
                "roundup_power2_divisions:4",
            })
    void ringWindowsOfTheExactAllocatorReplayExactly(String conf) {
        long seed = System.nanoTime();
        System.out.println("conf '" + conf + "' seed=" + seed);
        SplittableRandom rnd = new SplittableRandom(seed);
        for (int round = 0; round < 20; round++) {
            List<MemorySnapshot> devices = new ArrayList<>();
            int n = 1 + rnd.nextInt(2);
            for (int d = 0; d < n; d++) {
                devices.add(run(conf, rnd, rnd.nextBoolean()));
            }
            TraceSnapshot s = AllocatorSnapshots.toTraceSnapshot(devices, "fuzz");
            OracleReplay o = new OracleReplay().writeSnapshot(true);
            FidelityReport r = o.check(s);
            for (DeviceFidelity f : r.devices()) {
                String where = "conf '" + conf + "' seed " + seed + " round " + round + " device " + f.device();
                if (f.endSegmentsSame() != f.endSegments() || f.firstMismatch() != null) {
                    System.out.println(where + ": " + f);
                    var rec = new java.util.TreeMap<Long, String>();
                    for (var seg : s.segmentsOf(f.device())) {
                        rec.put(seg.address(), show(seg));
                    }
                    for (var seg : o.replayedSnapshot().segmentsOf(f.device())) {
                        String m = show(seg);
                        String rr = rec.remove(seg.address());
                        if (!m.equals(rr)) {
                            System.out.println("  model " + m + "\n  recor " + rr);
                        }
                    }
                    rec.values().forEach(v -> System.out.println("  only recorded " + v));
                    int len = s.traceOf(f.device()).size();
                    System.out.println("  trace head " + s.traceOf(f.device()).subList(0, Math.min(len, 6)));
                }
                assertThat(f.firstMismatch()).as(where).isNull();
                assertThat(f.exact()).as(where).isEqualTo(f.allocs());
                assertThat(f.endSegmentsSame()).as(where).isEqualTo(f.endSegments());
            }
        }
    }

    private static String show(io.gpumem.history.SegmentInfo seg) {
        StringBuilder b = new StringBuilder(Long.toHexString(seg.address()) + " " + seg.totalSize() + " s"
                + seg.stream() + " " + seg.pool() + (seg.expandable() ? " exp" : "") + ":");
        for (var bl : seg.blocks()) {
            b.append(' ')
                    .append(Long.toHexString(bl.address()))
                    .append('+')
                    .append(bl.size())
                    .append(bl.state().name().charAt(7));
        }
        return b.toString();
    }

    private static MemorySnapshot run(String conf, SplittableRandom rnd, boolean holdEvents) {
        SimulatedDevice device = SimulatedDevice.withCapacity(1L << 40);
        CachingAllocator a = new CachingAllocator(device, AllocatorConfig.parse(conf));
        long[] streams = {0, device.createStream(), device.createStream()};
        a.recordHistory(HistoryOptions.all(40 + rnd.nextInt(300)));
        List<long[]> live = new ArrayList<>();
        if (holdEvents) {
            device.holdEvents(true);
        }
        int ops = 200 + rnd.nextInt(600);
        for (int i = 0; i < ops; i++) {
            int what = rnd.nextInt(100);
            if (what < 50 || live.isEmpty()) {
                long size = switch (rnd.nextInt(4)) {
                    case 0 -> 1 + rnd.nextInt(4096);
                    case 1 -> 1 + rnd.nextLong(MiB + 1);
                    case 2 -> MiB + rnd.nextLong(10 * MiB);
                    default -> 10 * MiB + rnd.nextLong(90 * MiB);
                };
                long stream = streams[rnd.nextInt(streams.length)];
                live.add(new long[] {a.malloc(size, stream), stream});
            } else if (what < 90) {
                long[] b = live.remove(rnd.nextInt(live.size()));
                a.free(b[0]);
            } else if (what < 95) {
                long[] b = live.get(rnd.nextInt(live.size()));
                a.recordStream(b[0], streams[rnd.nextInt(streams.length)]);
            } else if (what < 98) {
                device.completeEvents(streams[rnd.nextInt(streams.length)]);
            } else {
                a.emptyCache();
            }
        }
        return a.snapshot();
    }
}
