package io.gpumem.history;

import java.util.Objects;

/**
 * One stack frame attached to an allocation or trace entry, as PyTorch's snapshots store it
 * ({@code {filename, line, name}}). Lists of frames are innermost first (allocator.md §10.6). The same record is used
 * for frames our allocator captures and for frames read from snapshot files (gpumem-trace), so {@code line}
 * is a {@code long}: a file's Python int is kept as recorded. Readers keep identical frame lists shared so
 * that writers can emit them once.
 *
 * @param filename source file, or a label chosen by the caller (the CLI uses it to name allocations)
 * @param line     line number, 0 when unknown
 * @param name     function name
 */
public record Frame(String filename, long line, String name) {
    public Frame {
        Objects.requireNonNull(filename, "filename");
        Objects.requireNonNull(name, "name");
    }
}
