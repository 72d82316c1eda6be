package io.gpumem.config;

/**
 * Parser for the {@code PYTORCH_CUDA_ALLOC_CONF} syntax (spec §9). PLACEHOLDER: accepts only the empty
 * string until the real parser lands (branch {@code support}).
 */
final class AllocatorConfigParser {
    private AllocatorConfigParser() {
    }

    static AllocatorConfig parse(String conf, AllocatorConfig previous) {
        if (conf == null || conf.isBlank()) {
            return previous.toBuilder().maxSplitSize(AllocatorConfig.UNLIMITED)
                    .roundupPower2Divisions(new int[AllocatorConfig.ROUNDUP_INTERVALS])
                    .garbageCollectionThreshold(0.0).raw(conf == null ? "" : conf).build();
        }
        throw new ConfigException("", "config parser not implemented yet: " + conf);
    }
}
