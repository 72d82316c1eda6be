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
}
