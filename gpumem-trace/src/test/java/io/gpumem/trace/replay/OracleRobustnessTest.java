package io.gpumem.trace.replay;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpumem.engine.RunOutcome;
import io.gpumem.history.FileKeys;
import io.gpumem.history.TraceEntry;
import io.gpumem.trace.TestTraces;
import io.gpumem.trace.io.PytorchSnapshotReader;
import io.gpumem.trace.io.TraceSnapshot;
import io.gpumem.trace.window.RecordedConfig;
import io.gpumem.trace.window.WindowRebuilder;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import org.junit.jupiter.api.Test;

/**
 * Replays of damaged recordings (entries dropped, duplicated, swapped, addresses and sizes changed; seeded) must
 * report what differs, never throw: both the oracle check and the what-if replay.
 */
class OracleRobustnessTest {

    @Test
    void damagedRecordingsAreReportedNotFatal() {
        TraceSnapshot original = new PytorchSnapshotReader().read(TestTraces.file("nca-train-empty-cache.pickle"));
        long seed = System.nanoTime();
        System.out.println("seed=" + seed);
        Random rnd = new Random(seed);
        for (int round = 0; round < 12; round++) {
            List<TraceEntry> t = new ArrayList<>(original.traceOf(0));
            for (int k = 0; k < 1 + rnd.nextInt(20); k++) {
                int i = rnd.nextInt(t.size());
                TraceEntry e = t.get(i);
                switch (rnd.nextInt(5)) {
                    case 0 -> t.remove(i);
                    case 1 -> t.add(i, e);
                    case 2 -> t.set(i, t.set(rnd.nextInt(t.size()), e));
                    case 3 ->
                        t.set(
                                i,
                                new TraceEntry(
                                        e.action(),
                                        e.addr() + 512L * rnd.nextInt(8192),
                                        e.size(),
                                        e.stream(),
                                        e.timeUs(),
                                        e.frames(),
                                        e.deviceFree(),
                                        FileKeys.of(e.fields(), e.actionName(), null, e.extra())));
                    default ->
                        t.set(
                                i,
                                new TraceEntry(
                                        e.action(),
                                        e.addr(),
                                        Math.max(1, e.size() + (rnd.nextInt(64) - 32) * (1L << 20)),
                                        e.stream(),
                                        e.timeUs(),
                                        e.frames(),
                                        e.deviceFree(),
                                        FileKeys.of(e.fields(), e.actionName(), null, e.extra())));
                }
            }
            TraceSnapshot damaged = new TraceSnapshot(
                    original.source(),
                    original.format(),
                    original.segments(),
                    List.of(t),
                    original.allocatorSettings(),
                    original.externalAnnotations(),
                    original.extra(),
                    true);
            FidelityReport r = new OracleReplay().check(damaged);
            assertThat(r.allocs()).as("seed " + seed).isPositive();
            assertThat(r.exact()).as("seed " + seed).isLessThanOrEqualTo(r.allocs());
            var config = RecordedConfig.of(damaged);
            WhatIfReplay w = new WhatIfReplay(damaged, 0, new WindowRebuilder(config).rebuild(damaged, 0));
            RunOutcome row = w.evaluate(config, true);
            assertThat(row.peakReserved()).as("seed " + seed).isGreaterThanOrEqualTo(row.peakAllocated());
        }
    }
}
