package io.gpumem.trace.io;

import java.util.Objects;

/**
 * One stack frame as PyTorch records it in snapshots ({@code {filename, line, name}}, spec §10.6).
 * Frame lists are innermost first; identical lists are shared between entries, and readers keep that
 * sharing so that writers can emit them once.
 */
public record Frame(String filename, long line, String name) {
    public Frame {
        Objects.requireNonNull(filename, "filename");
        Objects.requireNonNull(name, "name");
    }
}
