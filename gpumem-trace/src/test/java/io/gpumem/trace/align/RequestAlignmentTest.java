package io.gpumem.trace.align;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpumem.history.Frame;
import io.gpumem.history.TraceEntry;
import io.gpumem.trace.io.SourceFormat;
import io.gpumem.trace.io.TraceSnapshot;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;
import org.junit.jupiter.api.Test;

/**
 * The alignment is a longest common subsequence of the two token sequences (Myers' linear-space algorithm, with
 * tokens present on one side dropped first): on seeded random sequences over small alphabets, where many equal
 * tokens make many candidate matchings, it must match as many requests as a plain dynamic-programming LCS, and
 * every pair must be equal tokens in increasing order on both sides.
 */
class RequestAlignmentTest {

    /** A recording whose requests' call stacks are the given tokens (one Python line each). */
    private static RequestSequence sequence(int[] tokens, FrameSignatures sigs) {
        List<TraceEntry> t = new ArrayList<>();
        for (int i = 0; i < tokens.length; i++) {
            t.add(SyntheticAlignmentTest.entry(
                    (1L << 30) + ((long) i << 21), 512, List.of(new Frame("t.py", tokens[i], "f"))));
        }
        return RequestSequence.of(
                new TraceSnapshot(
                        "tokens", SourceFormat.PYTORCH_SNAPSHOT, List.of(), List.of(t), null, null, Map.of(), true),
                0,
                sigs);
    }

    private static int lcsLength(int[] a, int[] b) {
        int[][] dp = new int[a.length + 1][b.length + 1];
        for (int i = a.length - 1; i >= 0; i--) {
            for (int j = b.length - 1; j >= 0; j--) {
                dp[i][j] = a[i] == b[j] ? dp[i + 1][j + 1] + 1 : Math.max(dp[i + 1][j], dp[i][j + 1]);
            }
        }
        return dp[0][0];
    }

    private static int[] random(SplittableRandom rnd, int length, int alphabet) {
        int[] t = new int[length];
        for (int i = 0; i < length; i++) {
            t[i] = 1 + rnd.nextInt(alphabet);
        }
        return t;
    }

    @Test
    void theMatchingIsALongestCommonSubsequence() {
        long seed = Long.getLong("gpumem.seed", System.nanoTime()); // -Dgpumem.seed=N replays a run
        System.out.println("RequestAlignmentTest seed " + seed);
        SplittableRandom rnd = new SplittableRandom(seed);
        for (int round = 0; round < 400; round++) {
            int alphabet = 2 + rnd.nextInt(6);
            int[] a = random(rnd, 1 + rnd.nextInt(60), alphabet);
            int[] b;
            if (rnd.nextBoolean()) {
                b = random(rnd, 1 + rnd.nextInt(60), alphabet + rnd.nextInt(3)); // some tokens on one side only
            } else { // an edited copy: a few requests dropped, changed or added
                List<Integer> edited = new ArrayList<>();
                for (int x : a) {
                    int r = rnd.nextInt(10);
                    if (r == 0) {
                        continue;
                    }
                    edited.add(r == 1 ? 1 + rnd.nextInt(alphabet + 2) : x);
                    if (r == 2) {
                        edited.add(1 + rnd.nextInt(alphabet));
                    }
                }
                if (edited.isEmpty()) {
                    edited.add(1);
                }
                b = edited.stream().mapToInt(Integer::intValue).toArray();
            }
            FrameSignatures sigs = new FrameSignatures();
            RequestAlignment al =
                    RequestAlignment.align(sequence(a, sigs), sequence(b, sigs), RequestAlignment.Signal.STACKS);
            String at = "seed " + seed + ", round " + round;
            assertThat(al.matched()).as(at).isEqualTo(lcsLength(a, b));
            int last = -1;
            int pairs = 0;
            for (int i = 0; i < a.length; i++) {
                int j = al.matchOfA(i);
                if (j < 0) {
                    continue;
                }
                pairs++;
                assertThat(j).as(at).isGreaterThan(last);
                assertThat(b[j]).as(at + ", pair %d-%d", i, j).isEqualTo(a[i]);
                assertThat(al.matchOfB(j)).as(at).isEqualTo(i);
                last = j;
            }
            int unmatchedB = 0;
            for (int j = 0; j < b.length; j++) {
                unmatchedB += al.matchOfB(j) < 0 ? 1 : 0;
            }
            assertThat(pairs).isEqualTo(al.matched());
            assertThat(al.onlyInFirst()).isEqualTo(a.length - pairs);
            assertThat(al.onlyInSecond()).isEqualTo(unmatchedB).isEqualTo(b.length - pairs);
            assertThat(al.matchedFractionOfSmaller()).isEqualTo((double) pairs / Math.min(a.length, b.length));
        }
    }
}
