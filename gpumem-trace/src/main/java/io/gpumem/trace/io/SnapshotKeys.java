package io.gpumem.trace.io;

import java.util.HashMap;
import java.util.Map;

/**
 * The keys of a PyTorch snapshot's dicts (segments, blocks, trace entries, frames), each as the one {@code String}
 * object of the reader's literal. {@link PlainDataUnpickler} passes every string it decodes through
 * {@link #canonical}, so that a key read from the file is that object, and each later lookup with the literal
 * ({@code m.get("filename")}, a switch over an entry's keys) matches by identity instead of comparing characters.
 *
 * <p>Why it pays: a pickle decodes each distinct string once and hands out the memoised object after that, so this
 * costs a lookup per string decoded, not per use; a real recording gives every trace entry its own list of frame
 * dicts to look up, and on {@code lm2.7b-train-step.pickle} those comparisons were a sixth of reading the file.
 * A key missing here is still found, only by comparing characters.
 */
final class SnapshotKeys {

    private static final Map<String, String> KEYS = byValue(
            // frames and trace entries
            "filename",
            "name",
            "line",
            "frames",
            "action",
            "addr",
            "size",
            "stream",
            "time_us",
            "device_free",
            // the top level, segments and blocks
            "segments",
            "device_traces",
            "allocator_settings",
            "external_annotations",
            "address",
            "total_size",
            "allocated_size",
            "active_size",
            "requested_size",
            "real_size",
            "state",
            "blocks",
            "history",
            "device",
            "segment_type",
            "segment_pool_id",
            "is_expandable");

    private SnapshotKeys() {}

    private static Map<String, String> byValue(String... keys) {
        Map<String, String> m = new HashMap<>();
        for (String k : keys) {
            m.put(k, k);
        }
        return Map.copyOf(m);
    }

    /** {@code s}, or the literal of the snapshot key it equals. */
    static String canonical(String s) {
        String key = KEYS.get(s);
        return key != null ? key : s;
    }
}
