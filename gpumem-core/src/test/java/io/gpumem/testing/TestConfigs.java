package io.gpumem.testing;

import io.gpumem.config.AllocatorConfig;

/** Allocator configurations that many tests start from, declared once (shared through gpumem-core's test-jar). */
public final class TestConfigs {
    private TestConfigs() {}

    /** {@code expandable_segments:True}, with the text a snapshot reports. */
    public static AllocatorConfig expandable() {
        return AllocatorConfig.defaults().toBuilder()
                .expandableSegments(true)
                .raw("expandable_segments:True")
                .build();
    }

    /** {@code max_split_size_mb} of {@code bytes} (a whole number of MiB), with the text a snapshot reports. */
    public static AllocatorConfig maxSplit(long bytes) {
        return AllocatorConfig.defaults().toBuilder()
                .maxSplitSize(bytes)
                .raw("max_split_size_mb:" + (bytes >> 20))
                .build();
    }
}
