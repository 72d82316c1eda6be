package io.gpumem.trace.window;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpumem.alloc.Pool;
import io.gpumem.config.AllocatorConfig;
import io.gpumem.history.FileKeys;
import io.gpumem.history.PoolId;
import io.gpumem.history.SegmentInfo;
import io.gpumem.trace.io.SourceFormat;
import io.gpumem.trace.io.TraceSnapshot;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

class RecordedConfigTest {

    static TraceSnapshot with(Map<String, Object> settings, List<SegmentInfo> segments) {
        return new TraceSnapshot("t", SourceFormat.GENERATED, segments, List.of(), settings, null, Map.of(), true);
    }

    @Test
    void effectiveValuesComeFromTheSettingsNotTheString() {
        Map<String, Object> s = new LinkedHashMap<>();
        s.put("PYTORCH_CUDA_ALLOC_CONF", "something the parser would not take");
        s.put("max_split_size", 128L << 20);
        s.put("garbage_collection_threshold", 0.5);
        s.put("expandable_segments", true);
        Map<String, Object> table = new LinkedHashMap<>();
        for (int mb = 1; mb <= 32768; mb *= 2) {
            table.put(Integer.toString(mb), mb >= 256 ? 4L : 0L);
        }
        s.put("roundup_power2_divisions", table);
        AllocatorConfig c = RecordedConfig.of(with(s, List.of()));
        assertThat(c.maxSplitSize()).isEqualTo(128L << 20);
        assertThat(c.expandableSegments()).isTrue();
        assertThat(c.garbageCollectionThreshold()).isEqualTo(0.5);
        assertThat(c.roundupPower2Divisions(300L << 20)).isEqualTo(4);
        assertThat(c.roundupPower2Divisions(100L << 20)).isZero();
        assertThat(c.raw()).isEqualTo("something the parser would not take");
    }

    @Test
    void maxSplitOfMinusOneMibIsANegativeMaxSplitSizeMb() {
        Map<String, Object> s = new LinkedHashMap<>();
        s.put("PYTORCH_CUDA_ALLOC_CONF", "max_split_size_mb:-5");
        s.put("max_split_size", -(1L << 20));
        AllocatorConfig c = RecordedConfig.of(with(s, List.of()));
        assertThat(c.maxSplitSize()).isEqualTo(AllocatorConfig.NEGATIVE_MAX_SPLIT_SIZE);
        assertThat(c).isEqualTo(AllocatorConfig.parse("max_split_size_mb:-5"));
    }

    @Test
    void unsetMaxSplitIsUnlimitedAndMissingSettingsMeanDefaults() {
        Map<String, Object> s = new LinkedHashMap<>();
        s.put("PYTORCH_CUDA_ALLOC_CONF", "");
        s.put("max_split_size", -1L);
        s.put("expandable_segments", false);
        assertThat(RecordedConfig.of(with(s, List.of())).maxSplitSize()).isEqualTo(AllocatorConfig.UNLIMITED);
        assertThat(RecordedConfig.of(with(null, List.of())).expandableSegments())
                .isFalse();
        SegmentInfo expandable = new SegmentInfo(
                0,
                1L << 30,
                20L << 20,
                0,
                0,
                0,
                0,
                Pool.LARGE,
                true,
                List.of(),
                List.of(),
                PoolId.DEFAULT,
                FileKeys.of(SegmentInfo.EXPANDABLE));
        assertThat(RecordedConfig.of(with(null, List.of(expandable))).expandableSegments())
                .isTrue();
    }

    @Test
    void aStringOnlyIsParsed() {
        Map<String, Object> s = Map.of("PYTORCH_CUDA_ALLOC_CONF", "max_split_size_mb:64,expandable_segments:True");
        AllocatorConfig c = RecordedConfig.of(with(s, List.of()));
        assertThat(c.maxSplitSize()).isEqualTo(64L << 20);
        assertThat(c.expandableSegments()).isTrue();
    }

    /**
     * Sizes the allocator reported as unset are 0 or below, and leave the default: a recorded 0 is no
     * {@code max_split_size} of 0 bytes, nor a {@code max_non_split_rounding} of 0 (PIT: the boundaries survived).
     */
    @Test
    void zeroSizesInTheSettingsKeepTheDefaultsAndPositiveOnesAreTaken() {
        Map<String, Object> unset = new LinkedHashMap<>();
        unset.put("max_split_size", 0L);
        unset.put("max_non_split_rounding", 0L);
        AllocatorConfig defaults = RecordedConfig.of(with(unset, List.of()));
        assertThat(defaults.maxSplitSize()).isEqualTo(AllocatorConfig.UNLIMITED);
        assertThat(defaults.maxNonSplitRounding()).isEqualTo(AllocatorConfig.DEFAULT_MAX_NON_SPLIT_ROUNDING);

        Map<String, Object> set = new LinkedHashMap<>();
        set.put("max_split_size", 64L << 20);
        set.put("max_non_split_rounding", 64L << 20);
        AllocatorConfig c = RecordedConfig.of(with(set, List.of()));
        assertThat(c.maxSplitSize()).isEqualTo(64L << 20);
        assertThat(c.maxNonSplitRounding()).isEqualTo(64L << 20);
    }

    /**
     * The divisions table has one interval per power of two from 1 MiB to 32 GiB (32768 MiB, the last, which also
     * serves larger sizes); a key beyond it, or one that is no number, is skipped.
     */
    @Test
    void divisionKeysBeyondTheTableOrNotNumbersAreSkipped() {
        Map<String, Object> table = new LinkedHashMap<>();
        table.put("32768", 8L);
        table.put("65536", 2L);
        table.put(">", 16L);
        Map<String, Object> s = new LinkedHashMap<>();
        s.put("max_split_size", -1L);
        s.put("roundup_power2_divisions", table);
        AllocatorConfig c = RecordedConfig.of(with(s, List.of()));
        assertThat(c.roundupPower2Divisions(32L << 30)).isEqualTo(8);
        assertThat(c.roundupPower2Divisions(128L << 30)).isEqualTo(8);
        assertThat(c.roundupPower2Divisions(16L << 30)).isZero();
    }
}
