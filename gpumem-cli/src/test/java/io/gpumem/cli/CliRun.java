package io.gpumem.cli;

import java.io.ByteArrayInputStream;
import java.io.InputStream;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.nio.charset.StandardCharsets;

/**
 * One in-process run of {@code gpumem ARGS} through the command line {@code main} builds for those arguments
 * ({@link GpumemCli#commandLine(String[])}), for the command tests:
 * the exit status and everything written to standard output and standard error (both flushed after the run).
 *
 * @param exit the exit status picocli returns
 * @param out  standard output
 * @param err  standard error
 */
public record CliRun(int exit, String out, String err) {

    /** Runs {@code gpumem args}. */
    public static CliRun run(String... args) {
        StringWriter out = new StringWriter();
        StringWriter err = new StringWriter();
        PrintWriter outWriter = new PrintWriter(out, true);
        PrintWriter errWriter = new PrintWriter(err, true);
        var cl = GpumemCli.commandLine(args);
        cl.setOut(outWriter);
        cl.setErr(errWriter);
        int exit = cl.execute(args);
        outWriter.flush();
        errWriter.flush();
        return new CliRun(exit, out.toString(), err.toString());
    }

    /** Runs {@code gpumem args} with {@code stdin} as standard input (restored afterwards). */
    public static CliRun withInput(String stdin, String... args) {
        InputStream saved = System.in;
        try {
            System.setIn(new ByteArrayInputStream(stdin.getBytes(StandardCharsets.UTF_8)));
            return run(args);
        } finally {
            System.setIn(saved);
        }
    }

    /** The last non-blank line of standard output. */
    public String lastLine() {
        String[] lines = out.strip().split("\n", -1);
        return lines[lines.length - 1];
    }
}
