package io.gpumem.cli.options;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;

/**
 * Checks a file a command will write, before the command does any work: its directory must exist and be a
 * directory, the path must not be an existing directory, and it must not be one of the command's inputs (a
 * replay writing over the trace it reads would destroy it). The message names the option and the directory.
 */
public final class OutputFile {

    private OutputFile() {}

    /**
     * Refuses an output file that cannot be written (see {@link #problem}).
     *
     * @throws BadInputException naming the option, the file and why
     */
    public static void check(String option, Path out, Path... inputs) {
        String problem = problem(option, out, inputs);
        if (problem != null) {
            throw new BadInputException(problem);
        }
    }

    /**
     * Returns why {@code out} cannot be written, or null when it can.
     *
     * @param option the option that names the file, for the message (e.g. {@code --snapshot})
     * @param inputs the files the command reads
     */
    public static String problem(String option, Path out, Path... inputs) {
        Path absolute = out.toAbsolutePath().normalize();
        Path dir = absolute.getParent();
        if (dir != null && !Files.isDirectory(dir)) {
            return option + " " + out + ": "
                    + (Files.exists(dir)
                            ? dir + " is a file, not a directory"
                            : "the directory " + dir + " does not exist");
        }
        if (Files.isDirectory(absolute)) {
            return option + " " + out + ": is a directory; name a file";
        }
        for (Path in : inputs) {
            if (in != null && sameFile(absolute, in)) {
                return option + " " + out + ": is the input file; writing it would overwrite what is being read";
            }
        }
        return null;
    }

    private static boolean sameFile(Path out, Path in) {
        if (out.equals(in.toAbsolutePath().normalize())) {
            return true;
        }
        try {
            return Files.exists(out) && Files.exists(in) && Files.isSameFile(out, in);
        } catch (IOException e) {
            return false;
        }
    }
}
