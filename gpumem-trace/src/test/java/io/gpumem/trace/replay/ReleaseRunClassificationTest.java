package io.gpumem.trace.replay;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpumem.history.FileKeys;
import io.gpumem.history.TraceAction;
import io.gpumem.history.TraceEntry;
import io.gpumem.trace.io.OpsScriptReader;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * Which recorded release runs (segment_free / segment_unmap entries in a row) a what-if replays as the user's
 * {@code empty_cache()} and which it leaves to the capacity model as the OOM-retry path
 * ({@link WhatIfReplay#classifyReleaseRuns}), each rule on a hand-built trace. PIT showed the rules unpinned: the
 * shared traces hold too few kinds of runs to tell them apart.
 */
class ReleaseRunClassificationTest {

    /** The indices {@link WhatIfReplay#classifyReleaseRuns} marks in a trace given by its entries' action names. */
    static List<Integer> userRuns(String... actions) {
        List<TraceEntry> trace = new ArrayList<>();
        for (String name : actions) {
            TraceAction a = TraceAction.ofWireName(name);
            if (a == TraceAction.UNKNOWN) {
                // an action this version does not know, spelled as recorded (an ops script's empty_cache is one)
                trace.add(new TraceEntry(
                        TraceAction.UNKNOWN, 0, 0, 0, 0, null, -1, FileKeys.of(TraceEntry.TIME_US, name, null, null)));
            } else {
                trace.add(TraceEntry.of(a, 0x7f0000000000L + 0x200000L * trace.size(), 2L << 20, 0));
            }
        }
        boolean[] user = WhatIfReplay.classifyReleaseRuns(trace);
        assertThat(user).hasSize(actions.length);
        List<Integer> marked = new ArrayList<>();
        for (int i = 0; i < user.length; i++) {
            if (user[i]) {
                marked.add(i);
            }
        }
        return marked;
    }

    @Test
    void aRunThatOpensTheWindowIsTheUsersWhateverFollowsIt() {
        assertThat(userRuns("segment_free", "segment_alloc", "alloc")).containsExactly(0);
        assertThat(userRuns("segment_unmap", "oom")).containsExactly(0);
        // no alloc before it: frees and completions before the run do not make it a retry
        assertThat(userRuns("free_requested", "free_completed", "segment_free", "segment_alloc", "alloc"))
                .containsExactly(2);
    }

    @ParameterizedTest
    @ValueSource(strings = {"segment_alloc", "segment_map", "oom"})
    void afterAnAllocARunFollowedByADriverAllocationOrAnOomIsTheRetryPath(String next) {
        assertThat(userRuns("alloc", "segment_free", "segment_unmap", next)).isEmpty();
        assertThat(userRuns("alloc", "free_requested", "segment_unmap", next, "alloc"))
                .isEmpty();
    }

    @ParameterizedTest
    @ValueSource(strings = {"alloc", "free_requested", "free_completed", "snapshot"})
    void afterAnAllocARunFollowedByAnythingElseIsTheUsers(String next) {
        assertThat(userRuns("alloc", "segment_free", "segment_unmap", next)).containsExactly(1);
    }

    @Test
    void aRunThatEndsTheTraceIsTheUsers() {
        assertThat(userRuns("alloc", "segment_free")).containsExactly(1);
        assertThat(userRuns("alloc", "free_requested", "segment_unmap", "segment_unmap"))
                .containsExactly(2);
    }

    @Test
    void onlyTheFirstEntryOfEachRunIsMarked() {
        assertThat(userRuns(
                        "alloc",
                        "segment_free",
                        "segment_free",
                        "segment_unmap",
                        "free_requested",
                        "segment_unmap",
                        "segment_free",
                        "alloc"))
                .containsExactly(1, 5);
        // a retry run between two of the user's: each run is judged by what follows it
        assertThat(userRuns(
                        "segment_free",
                        "segment_free",
                        "alloc",
                        "segment_free",
                        "segment_free",
                        "segment_alloc",
                        "alloc",
                        "segment_unmap",
                        "segment_free"))
                .containsExactly(0, 7);
    }

    @Test
    void anOpsScriptsEmptyCacheIsTheUsersAndNoOtherUnknownActionIs() {
        assertThat(userRuns("alloc", OpsScriptReader.EMPTY_CACHE, "free_requested", OpsScriptReader.EMPTY_CACHE))
                .containsExactly(1, 3);
        assertThat(userRuns("alloc", "user_defined", "free_requested", "empty_cache_later"))
                .isEmpty();
        // the empty_cache entry is no release: the run after it is judged on its own (here the retry path)
        assertThat(userRuns("alloc", OpsScriptReader.EMPTY_CACHE, "segment_free", "segment_alloc"))
                .containsExactly(1);
    }

    @Test
    void aTraceWithoutReleasesMarksNothing() {
        assertThat(userRuns()).isEmpty();
        assertThat(userRuns("alloc", "segment_alloc", "free_requested", "free_completed", "oom"))
                .isEmpty();
    }
}
