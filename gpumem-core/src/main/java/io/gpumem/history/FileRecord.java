package io.gpumem.history;

import java.util.Map;

/**
 * A record a snapshot file holds ({@link SegmentInfo}, {@link BlockInfo}, {@link TraceEntry}), read through its
 * {@link FileKeys}: which optional keys it had and the keys this version does not interpret.
 */
public interface FileRecord {

    /** How the file had the record beyond its values. */
    FileKeys keys();

    /** Keys this version does not interpret, in file order; empty when none. */
    default Map<String, Object> extra() {
        return keys().extra();
    }

    /** Bits of the optional keys present (constants of the record type). */
    default int fields() {
        return keys().present();
    }

    /** Whether the optional key (a constant of the record type) was present. */
    default boolean has(int field) {
        return keys().has(field);
    }
}
