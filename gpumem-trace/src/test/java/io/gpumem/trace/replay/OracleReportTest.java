package io.gpumem.trace.replay;

import static io.gpumem.trace.replay.Recordings.read;
import static io.gpumem.trace.replay.Recordings.shift;
import static io.gpumem.trace.replay.Recordings.traceCopy;
import static io.gpumem.trace.replay.Recordings.twoDevices;
import static io.gpumem.trace.replay.Recordings.withTrace;
import static org.assertj.core.api.Assertions.assertThat;

import io.gpumem.config.AllocatorConfig;
import io.gpumem.history.TraceAction;
import io.gpumem.history.TraceEntry;
import io.gpumem.trace.io.TraceSnapshot;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * What the fidelity report says about recordings the model cannot follow: driver calls the model makes that the
 * recording lacks and recorded ones it never makes (in an {@code empty_cache} run, before it, after the last
 * request), frees of blocks the model does not hold, {@code oom} entries, driver allocations with no recorded
 * address; and the progress a long replay reports. PIT showed none of these verdicts, notes or counts pinned.
 *
 * <p>Entry numbers are those of the shared recordings: in {@code nca-train-empty-cache} entries 2077 to 2086 are
 * one run of ten {@code segment_free} (the last of a segment allocated at 2063) and 2087 the next
 * {@code segment_alloc}; in {@code tiny-forward} entries 21/22 free the block at 0x7f2118400000 and 95/96 are the
 * trace's last entries, the free of the block at 0x7f2118400200.
 */
class OracleReportTest {

    private static final String NOT_HELD =
            " is not an allocated block of this allocator (foreign pointer or double free))";

    private static DeviceFidelity only(FidelityReport r) {
        assertThat(r.devices()).hasSize(1);
        return r.devices().getFirst();
    }

    private static void assertMismatch(Mismatch m, int entry, String expected, String got) {
        assertThat(m).isNotNull();
        assertThat(m.entry()).as("entry of " + m).isEqualTo(entry);
        assertThat(m.kind()).isEqualTo("segment");
        assertThat(m.expected()).isEqualTo(expected);
        assertThat(m.got()).isEqualTo(got);
    }

    @Test
    void aReleaseTheRecordingLacksIsADriverCallWhereNoneWasExpected() {
        TraceSnapshot s = read("nca-train-empty-cache.pickle");
        List<TraceEntry> t = traceCopy(s, 0);
        t.remove(2086); // the run's last segment_free: the model still releases that segment
        DeviceFidelity d = only(new OracleReplay().check(withTrace(s, 0, t)));
        assertMismatch(d.firstMismatch(), 2077, "no driver call", "segment_free 0x7f503c000000 size 2606759936");
        assertThat(d.segmentEvents()).isEqualTo(26);
        assertThat(d.segmentMatched()).isEqualTo(26);
        assertThat(d.exact()).isEqualTo(d.allocs());
        assertThat(d.releaseRuns()).isEqualTo(2);
        assertThat(d.notes()).isEmpty();
    }

    @Test
    void aRecordedDriverCallBeforeAReleaseRunThatTheModelNeverMakesIsReportedMissing() {
        TraceSnapshot s = read("nca-train-empty-cache.pickle");
        List<TraceEntry> t = traceCopy(s, 0);
        t.add(2077, t.remove(2087)); // the segment_alloc after the run, moved before it
        DeviceFidelity d = only(new OracleReplay().check(withTrace(s, 0, t)));
        assertMismatch(d.firstMismatch(), 2077, "segment_alloc 0x7f5042000000 size 5211422720", "no driver call");
        // the run itself is compared with the model's releases, one for one
        assertThat(d.segmentEvents()).isEqualTo(27);
        assertThat(d.segmentMatched()).isEqualTo(26);
        assertThat(d.exact()).isEqualTo(d.allocs());
    }

    @Test
    void aDriverCallRecordedAfterTheLastRequestIsComparedAtTheEnd() {
        TraceSnapshot s = read("tiny-forward.pickle");
        List<TraceEntry> t = traceCopy(s, 0);
        t.add(t.getFirst().withAddr(0x7f00_0000_0000L)); // a segment_alloc after everything
        DeviceFidelity d = only(new OracleReplay().check(withTrace(s, 0, t)));
        assertMismatch(d.firstMismatch(), 97, "segment_alloc 0x7f0000000000 size 20971520", "no driver call");
        assertThat(d.segmentEvents()).isEqualTo(10);
        assertThat(d.segmentMatched()).isEqualTo(9);
        assertThat(d.isExact()).isFalse();
    }

    @Test
    void aFreeOfABlockAlreadyFreedIsNotedOnce() {
        TraceSnapshot s = read("tiny-forward.pickle");
        List<TraceEntry> t = traceCopy(s, 0);
        t.add(23, t.get(21));
        t.add(24, t.get(22));
        DeviceFidelity d = only(new OracleReplay().check(withTrace(s, 0, t)));
        assertThat(d.notes())
                .containsExactly("entry 24: free of 0x7f2118400000 that the model does not hold (free: 0x7f2118400000"
                        + NOT_HELD);
        assertThat(d.firstMismatch()).isNull();
        assertThat(d.isExact()).isTrue();

        t.add(t.get(97)); // and the trace's last free, twice, after every request
        t.add(t.get(98));
        d = only(new OracleReplay().check(withTrace(s, 0, t)));
        assertThat(d.notes())
                .containsExactly(
                        "entry 24: free of 0x7f2118400000 that the model does not hold (free: 0x7f2118400000"
                                + NOT_HELD,
                        "2 frees in all hit blocks the model does not hold");
    }

    /**
     * The model's block freed by a dropped free (the recording has no block at that address) is gone when its own
     * free comes: that free is noted as a free of the model's address that the model does not hold, as a free by
     * address would be, not as a request that failed in the replay.
     */
    @Test
    void aBlockADroppedFreeReleasedIsNotHeldWhenItsOwnFreeComes() {
        TraceSnapshot s = read("tiny-forward.pickle");
        List<TraceEntry> t = traceCopy(s, 0);
        shift(t, 12, 512); // recorded at 0x7f2118400200, the model places it at 0x7f2118400000
        // 21/22 free 0x7f2118400000, where the recording holds nothing: dropped, it frees the model's block there
        t.add(23, t.get(21).withAddr(0x7f2118400200L)); // the block's own free, at its recorded address
        t.add(24, t.get(22).withAddr(0x7f2118400200L));
        DeviceFidelity d = only(new OracleReplay().check(withTrace(s, 0, t)));
        assertThat(d.notes())
                .containsExactly("entry 24: free of 0x7f2118400000 that the model does not hold (free: 0x7f2118400000"
                        + NOT_HELD);
        assertThat(d.firstMismatch().entry()).isEqualTo(12);
    }

    @Test
    void aFreeRepeatedAfterTheLastRequestIsStillReplayed() {
        TraceSnapshot s = read("tiny-forward.pickle");
        List<TraceEntry> t = traceCopy(s, 0);
        t.add(t.get(95));
        t.add(t.get(96));
        DeviceFidelity d = only(new OracleReplay().check(withTrace(s, 0, t)));
        assertThat(d.notes())
                .containsExactly("entry 98: free of 0x7f2118400200 that the model does not hold (free: 0x7f2118400200"
                        + NOT_HELD);
    }

    @Test
    void oomEntriesAreCountedInTheNotes() {
        TraceSnapshot s = read("gnn-train-expandable-oom.pickle");
        String failed = ": the request failed in the recording and allocates nothing in the replay";
        FidelityReport r = new OracleReplay().check(s);
        assertThat(r.devices())
                .extracting(DeviceFidelity::notes)
                .containsExactly(List.of(), List.of("1 oom entry" + failed), List.of());

        List<TraceEntry> t = traceCopy(s, 1);
        int oom = -1;
        for (int i = 0; i < t.size() && oom < 0; i++) {
            if (t.get(i).action() == TraceAction.OOM) {
                oom = i;
            }
        }
        t.add(oom, t.get(oom));
        r = new OracleReplay().check(withTrace(s, 1, t));
        assertThat(r.devices().get(1).notes()).containsExactly("2 oom entries" + failed);
        assertThat(r.isExact()).isTrue();
    }

    @Test
    void aWhatIfThatReservesWhatTheRecordingNeverMappedGetsSyntheticAddresses() {
        TraceSnapshot s = read("tiny-forward.pickle");
        FidelityReport r = new OracleReplay().check(s, AllocatorConfig.parse("expandable_segments:True"));
        DeviceFidelity d = only(r);
        // a reservation per pool, at the synthetic base and above
        assertThat(d.notes()).containsExactly("2 driver allocations the recording does not have");
        Mismatch m = d.firstMismatch();
        assertThat(m.entry()).isEqualTo(1);
        assertThat(m.kind()).isEqualTo("alloc");
        assertThat(m.expected()).isEqualTo("0x7f217a600000");
        assertThat(m.got()).isEqualTo("0x4000000000000000");
        assertThat(d.exact()).isZero();
        assertThat(d.segmentMatched()).isZero();
        // the recorded end state's 9 segments, none held by the model, and the model's 2 where the recording has none
        assertThat(d.endSegments()).isEqualTo(11);
        assertThat(d.endSegmentsSame()).isZero();
    }

    @Test
    void progressIsReportedEvery16kEntriesAcrossDevicesAndAtTheEnd() {
        TraceSnapshot two = twoDevices(read("tiny-forward.pickle"), read("lm2.7b-train-step.pickle"), false);
        List<String> reported = new ArrayList<>();
        FidelityReport r = new OracleReplay()
                .progress((done, total) -> reported.add(done + "/" + total))
                .check(two);
        // 97 entries of device 0 before the first op at or past entry 16,384 of device 1 (19,342 entries)
        assertThat(reported).containsExactly((97 + 16385) + "/19439", "19439/19439");
        assertThat(r.isExact()).isTrue();
        assertThat(r.notes()).isEmpty();
        assertThat(r.allocs()).isEqualTo(36 + 6771);
    }

    @Test
    void aStateOnlySnapshotIsSaidToHoldNothingToReplay() {
        List<String> reported = new ArrayList<>();
        FidelityReport r = new OracleReplay()
                .progress((done, total) -> reported.add(done + "/" + total))
                .check(read("opt1.3b-state-only.pickle"));
        assertThat(r.notes())
                .containsExactly(
                        "no alloc entries: the file holds state only (a snapshot without history), nothing to replay");
        assertThat(r.allocs()).isZero();
        assertThat(reported).containsExactly("1/1");
    }

    @Test
    void aFileWithoutAddressesIsNotChecked() {
        TraceSnapshot s = read("tiny-forward.pickle");
        TraceSnapshot noAddresses = new TraceSnapshot(
                s.source(),
                s.format(),
                s.segments(),
                s.deviceTraces(),
                s.allocatorSettings(),
                s.externalAnnotations(),
                s.extra(),
                false);
        FidelityReport r = new OracleReplay().check(noAddresses);
        assertThat(r.devices()).isEmpty();
        assertThat(r.notes())
                .containsExactly("the file records no addresses (PyTorch snapshot): placement cannot be checked");
    }
}
