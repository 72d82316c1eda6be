package io.gpumem.history;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpumem.alloc.Pool;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/**
 * The snapshot records' own rules, which the trace module's round-trip tests use without naming: a record's file form
 * shared while it is plain and its own once it is not, the totals of a segment built from its blocks, and how a
 * segment and a block name themselves in a file.
 */
class SnapshotRecordsTest {

    @Test
    void aPlainFileFormIsSharedPerKeySetAndAnyOddityGetsItsOwn() {
        assertThat(FileKeys.of(5)).isSameAs(FileKeys.of(5)).isSameAs(FileKeys.of(5, null, null, Map.of()));
        assertThat(FileKeys.of(5, null, null, null)).isSameAs(FileKeys.of(5));
        assertThat(FileKeys.of(63)).isSameAs(FileKeys.of(63));
        assertThat(FileKeys.of(64)).isEqualTo(FileKeys.of(64)).isNotSameAs(FileKeys.of(64)); // past the shared table
        assertThat(FileKeys.of(-1).present()).isEqualTo(-1);

        FileKeys spelled = FileKeys.of(5, "active_awaiting_free", null, null);
        FileKeys history = FileKeys.of(5, null, List.of(), null);
        FileKeys extra = FileKeys.of(5, null, null, Map.of("user_metadata", "x"));
        for (FileKeys own : List.of(spelled, history, extra)) {
            assertThat(own).isNotSameAs(FileKeys.of(5)).isNotEqualTo(FileKeys.of(5));
            assertThat(own.present()).isEqualTo(5);
        }
        assertThat(spelled.spelled()).isEqualTo("active_awaiting_free");
        assertThat(history.history()).isEmpty();
        assertThat(extra.extra()).containsEntry("user_metadata", "x");
        assertThat(new FileKeys(1, null, null, null).extra()).isEmpty();

        assertThat(FileKeys.of(5).has(1)).isTrue();
        assertThat(FileKeys.of(5).has(4)).isTrue();
        assertThat(FileKeys.of(5).has(2)).isFalse();
        assertThat(FileKeys.of(5).has(2 | 4)).as("any of the bits").isTrue();
        assertThat(FileKeys.of(0).has(1)).isFalse();

        assertThat(FileKeys.of(5).withPresent(5)).isSameAs(FileKeys.of(5));
        assertThat(FileKeys.of(5).withPresent(3)).isSameAs(FileKeys.of(3));
        FileKeys moved = spelled.withPresent(3);
        assertThat(moved.present()).isEqualTo(3);
        assertThat(moved.spelled()).isEqualTo("active_awaiting_free"); // the oddity goes along
    }

    @Test
    void aSegmentBuiltFromItsBlocksCarriesTheirTotalsAndNamesItsPool() {
        List<BlockInfo> blocks = List.of(
                BlockInfo.of(0x1000, 512, 500, BlockState.ACTIVE_ALLOCATED),
                BlockInfo.of(0x1200, 1024, 1000, BlockState.ACTIVE_PENDING_FREE),
                BlockInfo.of(0x1600, 2048, 0, BlockState.INACTIVE));
        SegmentInfo s = SegmentInfo.ofBlocks(1, 0x1000, 7, Pool.SMALL, false, blocks);
        assertThat(s.totalSize()).isEqualTo(3584);
        assertThat(s.allocatedSize()).isEqualTo(512);
        assertThat(s.activeSize()).isEqualTo(1536);
        assertThat(s.requestedSize()).isEqualTo(1500);
        assertThat(s.end()).isEqualTo(0x1000 + 3584);
        assertThat(s.bytesIn(BlockState.INACTIVE)).isEqualTo(2048);
        assertThat(s.bytesIn(BlockState.ACTIVE_ALLOCATED)).isEqualTo(512);
        assertThat(s.isFullyFree()).isFalse();
        assertThat(s.isSmall()).isTrue();
        assertThat(s.segmentType()).isEqualTo("small");
        assertThat(s.poolId()).isEqualTo(PoolId.DEFAULT);
        assertThat(s.keys().has(SegmentInfo.REQUESTED_SIZE | SegmentInfo.POOL_ID | SegmentInfo.EXPANDABLE))
                .isTrue();

        SegmentInfo large = SegmentInfo.ofBlocks(
                0, 0x200000, 0, Pool.LARGE, true, List.of(BlockInfo.of(0x200000, 4096, 0, BlockState.INACTIVE)));
        assertThat(large.isSmall()).isFalse();
        assertThat(large.segmentType()).isEqualTo("large");
        assertThat(large.isFullyFree()).isTrue();

        assertThat(s.onDevice(1)).isSameAs(s);
        SegmentInfo moved = s.onDevice(3);
        assertThat(moved.device()).isEqualTo(3);
        assertThat(moved).usingRecursiveComparison().ignoringFields("device").isEqualTo(s);

        SegmentInfo odd = new SegmentInfo(
                0,
                s.address(),
                s.totalSize(),
                s.allocatedSize(),
                s.activeSize(),
                s.requestedSize(),
                s.stream(),
                Pool.LARGE,
                false,
                null,
                s.blocks(),
                null,
                FileKeys.of(0, "huge", null, null));
        assertThat(odd.segmentType()).as("as the file spelled it").isEqualTo("huge");
        assertThat(odd.poolId()).as("a missing pool id is the default pool").isEqualTo(PoolId.DEFAULT);
        assertThat(new SegmentInfo(0, 0, 0, 0, 0, 0, 0, Pool.LARGE, false, null, List.of(), PoolId.DEFAULT, null)
                        .keys())
                .as("a missing file form is the plain one")
                .isSameAs(s.keys());
    }

    @Test
    void aBlockNamesItsStateAsTheFileDidAndCountsOnlyAllocatedSlack() {
        BlockInfo allocated = BlockInfo.of(0, 1024, 1000, BlockState.ACTIVE_ALLOCATED);
        assertThat(allocated.stateName()).isEqualTo("active_allocated");
        assertThat(allocated.internalSlack()).isEqualTo(24);
        assertThat(allocated.end()).isEqualTo(1024);
        assertThat(allocated.history()).isNull();
        assertThat(BlockInfo.of(0, 1024, 4096, BlockState.ACTIVE_ALLOCATED).internalSlack())
                .as("a request larger than its block leaves none")
                .isZero();
        assertThat(BlockInfo.of(0, 1024, -1, BlockState.ACTIVE_ALLOCATED).internalSlack())
                .as("an unknown request: the whole block")
                .isEqualTo(1024);
        assertThat(BlockInfo.of(0, 1024, 1000, BlockState.ACTIVE_PENDING_FREE).internalSlack())
                .as("not allocated")
                .isZero();
        BlockInfo odd =
                new BlockInfo(0, 512, 0, BlockState.UNKNOWN, null, FileKeys.of(3, "active_awaiting_free", null, null));
        assertThat(odd.stateName()).isEqualTo("active_awaiting_free");
        assertThat(odd.isAllocated()).isFalse();
        assertThat(new BlockInfo(0, 512, 0, BlockState.INACTIVE, null, null).keys())
                .isSameAs(allocated.keys());
    }
}
