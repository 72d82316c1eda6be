package io.gpumem.trace.align;

import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * The size at a value never recorded of each block live at the reference window's start (weights, optimizer state,
 * inputs and whatever the previous step left live): blocks allocated before the window have no request to align, so
 * they are matched by size instead.
 *
 * <p>Matching: a size that every recording holds some number of times is taken as that many constant blocks (what
 * does not scale stays); the blocks left over in each recording are the ones that scale. When every recording has
 * as many left over as the reference, they are paired by rank of size (the smallest with the smallest: sizes that
 * grow with the value keep their order) and each pair's sizes are fitted with {@link SizeLaw#fit}. A block without a
 * law (counts that differ, no exact law, a law that gives no positive size) keeps the reference's size and is
 * counted, never hidden: {@link #kept()}.
 *
 * <p>Invariants: {@code size(i)} is defined for every start block {@code i} of the reference, in its slot order;
 * {@code scaled() + kept() + constant == reference().startBlocks()}.
 */
final class StartBlockLaws {

    private final long[] size;
    private final int scaled;
    private final int kept;

    private StartBlockLaws(long[] size, int scaled, int kept) {
        this.size = size;
        this.scaled = scaled;
        this.kept = kept;
    }

    /** The reference's ({@code recordings.get(0)}) start blocks at {@code x}. */
    static StartBlockLaws predict(List<RequestSequence> recordings, long[] labels, long x) {
        int k = recordings.size();
        RequestSequence ref = recordings.getFirst();
        // a size's common count: how many constant blocks of that size every recording has
        Map<Long, Integer> common = counts(ref);
        for (int j = 1; j < k; j++) {
            Map<Long, Integer> cj = counts(recordings.get(j));
            common.replaceAll((s, n) -> Math.min(n, cj.getOrDefault(s, 0)));
        }
        long[] out = new long[ref.startBlocks()];
        int[] scaling = new int[ref.startBlocks()];
        int nScaling = 0;
        Map<Long, Integer> seen = new HashMap<>();
        for (int i = 0; i < out.length; i++) {
            long s = ref.startBlockSizeOf(i);
            out[i] = s;
            if (seen.merge(s, 1, Integer::sum) > common.getOrDefault(s, 0)) {
                scaling[nScaling++] = i;
            }
        }
        long[][] leftOver = new long[k][];
        leftOver[0] = new long[nScaling];
        for (int t = 0; t < nScaling; t++) {
            leftOver[0][t] = ref.startBlockSizeOf(scaling[t]);
        }
        boolean paired = true;
        for (int j = 1; j < k && paired; j++) {
            leftOver[j] = leftOver(recordings.get(j), common);
            paired = leftOver[j].length == nScaling;
        }
        if (!paired || nScaling == 0) {
            return new StartBlockLaws(out, 0, nScaling);
        }
        // pair by rank of size: sort the reference's scaling blocks by size (stable), the others' sizes too
        Integer[] order = new Integer[nScaling];
        for (int t = 0; t < nScaling; t++) {
            order[t] = t;
        }
        Arrays.sort(order, (p, q) -> Long.compare(leftOver[0][p], leftOver[0][q]));
        for (int j = 1; j < k; j++) {
            Arrays.sort(leftOver[j]);
        }
        int scaled = 0;
        long[] sizes = new long[k];
        for (int rank = 0; rank < nScaling; rank++) {
            int t = order[rank];
            sizes[0] = leftOver[0][t];
            for (int j = 1; j < k; j++) {
                sizes[j] = leftOver[j][rank];
            }
            SizeLaw law = SizeLaw.fit(labels, sizes);
            long v = law == null ? -1 : law.at(x);
            if (v > 0) {
                out[scaling[t]] = v;
                scaled++;
            }
        }
        return new StartBlockLaws(out, scaled, nScaling - scaled);
    }

    private static Map<Long, Integer> counts(RequestSequence s) {
        Map<Long, Integer> out = new HashMap<>();
        for (int i = 0; i < s.startBlocks(); i++) {
            out.merge(s.startBlockSizeOf(i), 1, Integer::sum);
        }
        return out;
    }

    private static long[] leftOver(RequestSequence s, Map<Long, Integer> common) {
        Map<Long, Integer> seen = new HashMap<>();
        long[] out = new long[s.startBlocks()];
        int n = 0;
        for (int i = 0; i < s.startBlocks(); i++) {
            long size = s.startBlockSizeOf(i);
            if (seen.merge(size, 1, Integer::sum) > common.getOrDefault(size, 0)) {
                out[n++] = size;
            }
        }
        return Arrays.copyOf(out, n);
    }

    /** Start block {@code i}'s size at the value. */
    long size(int i) {
        return size[i];
    }

    /** Start blocks whose size a non-constant law gives. */
    int scaled() {
        return scaled;
    }

    /** Start blocks that scale but have no law: kept at the reference's size. */
    int kept() {
        return kept;
    }
}
