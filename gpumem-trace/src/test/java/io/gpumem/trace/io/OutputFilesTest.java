package io.gpumem.trace.io;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Every output file goes through {@link OutputFiles}: a new file gets ordinary permissions (a plan file was left
 * owner-only, as its temporary file was created), a replaced one keeps its own, and a failure leaves the target as
 * it was and no temporary file behind.
 */
class OutputFilesTest {

    @Test
    void aNewFileIsReadableByAllAndAReplacedOneKeepsItsPermissions(@TempDir Path dir) throws IOException {
        assumeTrue(dir.getFileSystem().supportedFileAttributeViews().contains("posix"), "no POSIX permissions here");
        Path file = dir.resolve("out.txt");
        OutputFiles.replace(file, out -> out.write("one".getBytes(StandardCharsets.UTF_8)));
        assertThat(Files.readString(file)).isEqualTo("one");
        assertThat(PosixFilePermissions.toString(Files.getPosixFilePermissions(file)))
                .isEqualTo("rw-r--r--");

        Files.setPosixFilePermissions(file, PosixFilePermissions.fromString("rw-rw----"));
        OutputFiles.replace(file, out -> out.write("two".getBytes(StandardCharsets.UTF_8)));
        assertThat(Files.readString(file)).isEqualTo("two");
        assertThat(PosixFilePermissions.toString(Files.getPosixFilePermissions(file)))
                .isEqualTo("rw-rw----");
    }

    @Test
    void aFailureLeavesTheTargetAsItWasAndNothingBehind(@TempDir Path dir) throws IOException {
        Path file = dir.resolve("out.txt");
        Files.writeString(file, "old");
        assertThatThrownBy(() -> OutputFiles.replace(file, out -> {
                    out.write("half".getBytes(StandardCharsets.UTF_8));
                    throw new IOException("disk full");
                }))
                .hasMessage("disk full");
        assertThat(Files.readString(file)).isEqualTo("old");
        Path absent = dir.resolve("never.txt");
        assertThatThrownBy(() -> OutputFiles.replace(absent, out -> {
                    throw new IOException("no");
                }))
                .hasMessage("no");
        assertThat(absent).doesNotExist();
        try (Stream<Path> left = Files.list(dir)) {
            assertThat(left).containsExactly(file);
        }
    }
}
