package io.gpumem.trace.io;

import java.io.BufferedOutputStream;
import java.io.IOException;
import java.io.OutputStream;
import java.nio.file.AccessDeniedException;
import java.nio.file.AtomicMoveNotSupportedException;
import java.nio.file.FileSystemException;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.nio.file.attribute.PosixFilePermission;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.Set;

/**
 * The one way gpumem writes an output file (a snapshot, a plan, an HTML page): into a temporary sibling, then moved
 * over the target, so a failure at any point leaves the target as it was (absent, or the old file) and no partial
 * file behind. The file gets ordinary permissions: those of the file it replaces, or {@code rw-r--r--} when new (a
 * temporary file is created owner-only).
 */
public final class OutputFiles {

    /** Writes the bytes of one output; may throw, leaving nothing behind. */
    @FunctionalInterface
    public interface Content {
        void writeTo(OutputStream out) throws IOException;
    }

    private OutputFiles() {}

    /** Writes {@code content} to {@code file}, replacing it atomically where the file system can. */
    public static void replace(Path file, Content content) throws IOException {
        Path abs = file.toAbsolutePath();
        Path dir = abs.getParent();
        Path tmp = Files.createTempFile(dir, "." + abs.getFileName() + ".", ".tmp");
        boolean done = false;
        try {
            try (OutputStream out = new BufferedOutputStream(Files.newOutputStream(tmp), 1 << 16)) {
                content.writeTo(out);
            }
            giveOrdinaryPermissions(tmp, abs);
            try {
                Files.move(tmp, abs, StandardCopyOption.REPLACE_EXISTING, StandardCopyOption.ATOMIC_MOVE);
            } catch (AtomicMoveNotSupportedException e) {
                Files.move(tmp, abs, StandardCopyOption.REPLACE_EXISTING);
            }
            done = true;
        } finally {
            if (!done) {
                Files.deleteIfExists(tmp);
            }
        }
    }

    /**
     * Why a {@link #replace} failed, in words, for a message that already names the target: {@code "permission
     * denied"}, {@code "no such file or directory"}, the file system's reason, or the exception's message. A file
     * system exception's message is only the path it failed on, here the temporary sibling the user never named.
     */
    public static String reason(IOException e) {
        if (e instanceof AccessDeniedException) {
            return "permission denied";
        }
        if (e instanceof NoSuchFileException) {
            return "no such file or directory";
        }
        if (e instanceof FileSystemException f && f.getReason() != null) {
            return f.getReason();
        }
        return e.getMessage() != null ? e.getMessage() : e.getClass().getSimpleName();
    }

    private static void giveOrdinaryPermissions(Path tmp, Path file) throws IOException {
        if (!tmp.getFileSystem().supportedFileAttributeViews().contains("posix")) {
            return;
        }
        Set<PosixFilePermission> perms =
                Files.exists(file) ? Files.getPosixFilePermissions(file) : PosixFilePermissions.fromString("rw-r--r--");
        Files.setPosixFilePermissions(tmp, perms);
    }
}
