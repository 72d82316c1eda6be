package io.gpumem.trace.io;

import static io.gpumem.testing.TestSizes.MiB;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.gpumem.alloc.Pool;
import io.gpumem.history.BlockInfo;
import io.gpumem.history.BlockState;
import io.gpumem.history.FileKeys;
import io.gpumem.history.PoolId;
import io.gpumem.history.SegmentInfo;
import io.gpumem.trace.TestTraces;
import java.io.ByteArrayInputStream;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/**
 * An inconsistent snapshot (a segment whose {@code total_size} is not the sum of its blocks, blocks outside their
 * segment, overlapping segments) is named precisely, read back from a pickle the project's own writer made; the
 * real traces are all consistent.
 */
class SnapshotConsistencyTest {

    private static final long BASE = 0x7f0000000000L;

    static SegmentInfo segment(int device, long address, long totalSize, BlockInfo... blocks) {
        return new SegmentInfo(
                device,
                address,
                totalSize,
                0,
                0,
                0,
                0,
                Pool.LARGE,
                false,
                List.of(),
                List.of(blocks),
                PoolId.DEFAULT,
                null);
    }

    /** A snapshot of {@code segments} and no trace, as built in memory. */
    static TraceSnapshot direct(String source, SegmentInfo... segments) {
        return new TraceSnapshot(
                source,
                SourceFormat.PYTORCH_SNAPSHOT,
                List.of(segments),
                List.of(List.of()),
                null,
                null,
                Map.of(),
                true);
    }

    /** {@code segments} written as a pickle by {@link PytorchSnapshotWriter} and read back, as a command reads it. */
    static TraceSnapshot pickled(SegmentInfo... segments) {
        byte[] bytes = new PytorchSnapshotWriter().toBytes(direct("bad.pickle", segments));
        return new PytorchSnapshotReader().read(new ByteArrayInputStream(bytes), "bad.pickle");
    }

    @Test
    void aSegmentDeclaringTwoToTheSixtySecondBytesOverBlocksOf512MiBIsNamed() {
        TraceSnapshot s = pickled(
                segment(0, BASE, 1L << 62, BlockInfo.of(BASE, 512 * MiB, 512 * MiB, BlockState.ACTIVE_ALLOCATED)));
        assertThat(SnapshotConsistency.problems(s))
                .containsExactly(
                        "segment 0x7f0000000000 on device 0 declares"
                                + " total_size 4611686018427387904 (4294967296.00 GiB) but its 1 block(s) add up to 536870912 (512.00 MiB)");
        assertThatThrownBy(() -> SnapshotConsistency.check(s, false, w -> {}))
                .isInstanceOf(InconsistentSnapshotException.class)
                .hasMessage(
                        "bad.pickle: segments: inconsistent snapshot: segment 0x7f0000000000 on device 0 declares"
                                + " total_size 4611686018427387904 (4294967296.00 GiB) but its 1 block(s) add up to 536870912 (512.00 MiB)");
        List<String> warnings = new ArrayList<>();
        SnapshotConsistency.check(s, true, warnings::add);
        assertThat(warnings)
                .singleElement()
                .asString()
                .startsWith("warning: bad.pickle: inconsistent snapshot: segment 0x7f0000000000 on device 0");
    }

    @Test
    void overlappingSegmentsAndBlocksOutsideTheirSegmentAreNamedPerDevice() {
        long second = BASE + 10 * MiB;
        TraceSnapshot s = pickled(
                segment(0, BASE, 20 * MiB, BlockInfo.of(BASE, 20 * MiB, 0, BlockState.INACTIVE)),
                segment(0, second, 20 * MiB, BlockInfo.of(second, 20 * MiB, 0, BlockState.INACTIVE)),
                // the same range on another device is no overlap
                segment(
                        1,
                        BASE,
                        20 * MiB,
                        BlockInfo.of(BASE, 2 * MiB, 0, BlockState.INACTIVE),
                        BlockInfo.of(BASE + 30 * MiB, 18 * MiB, 0, BlockState.INACTIVE)));
        assertThat(SnapshotConsistency.problems(s))
                .containsExactly(
                        "segment 0x7f0000a00000 on device 0 overlaps the segment at 0x7f0000000000 (which ends at"
                                + " 0x7f0001400000)",
                        "segment 0x7f0000000000 on device 1 (20.00 MiB) holds the block at 0x7f0001e00000 of 18874368 bytes,"
                                + " outside it");
        List<String> warnings = new ArrayList<>();
        SnapshotConsistency.check(s, true, warnings::add);
        assertThat(warnings).hasSize(2);
        assertThatThrownBy(() -> SnapshotConsistency.check(s, false, w -> {}))
                .hasMessageEndingWith("(and 1 more inconsistencies)");
    }

    /**
     * A block in a state no allocator writes was refused by the analysis but read by compare, diff and replay, which
     * took it for free memory: it is an inconsistency, named with the state as spelled.
     */
    @Test
    void anExpandableSegmentOfPartPagesIsNamed() {
        BlockInfo whole = BlockInfo.of(BASE, 512 * MiB, 512 * MiB, BlockState.ACTIVE_ALLOCATED);
        SegmentInfo expandable = SegmentInfo.ofBlocks(0, BASE, 0, Pool.LARGE, true, List.of(whole));
        assertThat(SnapshotConsistency.problems(pickled(expandable)))
                .containsExactly("segment 0x7f0000000000 on device 0 is expandable, but its total_size 536870912 is not"
                        + " a whole number of the large pool's 20.00 MiB pages");
        // 2 MiB pages in the small pool; the same size in whole large pages is consistent
        BlockInfo small = BlockInfo.of(BASE, 6 * MiB, 6 * MiB, BlockState.ACTIVE_ALLOCATED);
        assertThat(SnapshotConsistency.problems(
                        pickled(SegmentInfo.ofBlocks(0, BASE, 0, Pool.SMALL, true, List.of(small)))))
                .isEmpty();
        BlockInfo large = BlockInfo.of(BASE, 60 * MiB, 60 * MiB, BlockState.ACTIVE_ALLOCATED);
        assertThat(SnapshotConsistency.problems(
                        pickled(SegmentInfo.ofBlocks(0, BASE, 0, Pool.LARGE, true, List.of(large)))))
                .isEmpty();
    }

    @Test
    void aBlockInAStateNoAllocatorWritesIsNamed() {
        BlockInfo weird = new BlockInfo(
                BASE, 20 * MiB, 0, BlockState.UNKNOWN, List.of(), FileKeys.of(BlockInfo.ADDRESS, "weird", null, null));
        for (TraceSnapshot s : List.of(
                direct("bad.pickle", segment(0, BASE, 20 * MiB, weird)), pickled(segment(0, BASE, 20 * MiB, weird)))) {
            assertThat(SnapshotConsistency.problems(s))
                    .containsExactly(
                            "segment 0x7f0000000000 on device 0 holds the block at 0x7f0000000000 in state"
                                    + " 'weird', which no allocator writes (active_allocated, active_pending_free or inactive)");
            assertThatThrownBy(() -> SnapshotConsistency.check(s, false, w -> {}))
                    .isInstanceOf(InconsistentSnapshotException.class);
        }
    }

    @Test
    void segmentsAreComparedInAddressOrderWithTheOneThatReachesFurthest() {
        // Given out of address order: the check sorts each device's segments first. The second lies inside the
        // first, so the later ones are compared with the first (which reaches furthest), not with the second.
        // A segment ending where the first does leaves the first as the one compared with (its address is named).
        // Built directly, not pickled: the reader would hand the segments over sorted.
        long inner = BASE + 2 * MiB;
        long sameEnd = BASE + 4 * MiB;
        long third = BASE + 6 * MiB;
        TraceSnapshot s = direct(
                "direct",
                segment(0, third, 4 * MiB, BlockInfo.of(third, 4 * MiB, 0, BlockState.INACTIVE)),
                segment(0, sameEnd, 4 * MiB, BlockInfo.of(sameEnd, 4 * MiB, 0, BlockState.INACTIVE)),
                segment(0, inner, 2 * MiB, BlockInfo.of(inner, 2 * MiB, 0, BlockState.INACTIVE)),
                segment(0, BASE, 8 * MiB, BlockInfo.of(BASE, 8 * MiB, 0, BlockState.INACTIVE)));
        String first = " on device 0 overlaps the segment at 0x7f0000000000 (which ends at 0x7f0000800000)";
        assertThat(SnapshotConsistency.problems(s))
                .containsExactly(
                        "segment 0x7f0000200000" + first,
                        "segment 0x7f0000400000" + first,
                        "segment 0x7f0000600000" + first);
    }

    @Test
    void segmentsThatOnlyTouchDoNotOverlap() {
        long second = BASE + 2 * MiB;
        TraceSnapshot s = pickled(
                segment(
                        0,
                        BASE,
                        2 * MiB,
                        BlockInfo.of(BASE, MiB, MiB, BlockState.ACTIVE_ALLOCATED),
                        BlockInfo.of(BASE + MiB, MiB, 0, BlockState.INACTIVE)),
                segment(0, second, 2 * MiB, BlockInfo.of(second, 2 * MiB, 0, BlockState.INACTIVE)));
        assertThat(SnapshotConsistency.problems(s)).isEmpty();
    }

    @Test
    void blocksWhoseSizesSumPastTwoToTheSixtyThreeAreCalledSo() {
        // Each block lies inside the (huge) segment; only their sum overflows a long.
        long quarter = 1L << 62;
        SegmentInfo huge = segment(
                0,
                0,
                Long.MAX_VALUE,
                BlockInfo.of(0, quarter, 0, BlockState.INACTIVE),
                BlockInfo.of(0, quarter, 0, BlockState.INACTIVE),
                BlockInfo.of(0, quarter, 0, BlockState.INACTIVE));
        TraceSnapshot s = direct("huge.pickle", huge);
        assertThat(SnapshotConsistency.problems(s))
                .singleElement()
                .asString()
                .endsWith("but its 3 block(s) add up to more than 2^63 bytes");
    }

    @Test
    void leniencyListsTenProblemsAndCountsTheRest() {
        // One inconsistent segment per MiB: each declares twice what its one block holds.
        for (int count : new int[] {SnapshotConsistency.LISTED, SnapshotConsistency.LISTED + 3}) {
            SegmentInfo[] segments = new SegmentInfo[count];
            for (int i = 0; i < count; i++) {
                long at = BASE + 2L * i * MiB;
                segments[i] = segment(0, at, 2 * MiB, BlockInfo.of(at, MiB, 0, BlockState.INACTIVE));
            }
            TraceSnapshot s = pickled(segments);
            List<String> warnings = new ArrayList<>();
            SnapshotConsistency.check(s, true, warnings::add);
            if (count == SnapshotConsistency.LISTED) {
                assertThat(warnings).hasSize(count).allMatch(w -> w.contains("declares total_size 2097152"));
            } else {
                assertThat(warnings).hasSize(SnapshotConsistency.LISTED + 1);
                assertThat(warnings.getLast()).isEqualTo("warning: bad.pickle: 3 more inconsistencies not listed");
            }
        }
    }

    @Test
    void everySharedTraceIsConsistent() throws Exception {
        List<Path> files = TestTraces.pickles();
        for (Path file : files) {
            TraceSnapshot s = TraceReaders.read(file);
            assertThat(SnapshotConsistency.problems(s)).as(file.toString()).isEmpty();
            assertThat(s.segments()).as(file + ": a test that cannot fail").isNotEmpty();
        }
    }
}
