package io.gpumem.cli;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.IOException;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import picocli.CommandLine;

/**
 * The top-level command line: a run builds only the part of picocli's model it can use (start-up time), and
 * what the user sees is the same as with every command's full model.
 */
class GpumemCliTest {

    /** Runs {@code args} on a given command line and returns its standard output. */
    private static String out(CommandLine cl, String... args) {
        StringWriter out = new StringWriter();
        cl.setOut(new PrintWriter(out, true));
        cl.setErr(new PrintWriter(new StringWriter(), true));
        assertThat(cl.execute(args)).isZero();
        return out.toString();
    }

    @Test
    void topLevelUsageFromTheCommandStubsIsTheFullModelsUsage() {
        String full = out(GpumemCli.commandLine(), "--help");
        assertThat(full).contains("Commands:", "replay", "kv-sim", "plan");
        for (String[] args : new String[][] {{}, {"--help"}, {"-h"}}) {
            assertThat(out(GpumemCli.commandLine(args), args))
                    .as(String.join(" ", args))
                    .isEqualTo(full);
        }
        assertThat(out(GpumemCli.commandLine(new String[] {"--version"}), "--version"))
                .isEqualTo(out(GpumemCli.commandLine(), "--version"))
                .contains("gpumem");
    }

    @Test
    void aRunThatUsesOneCommandRegistersOnlyThatOneInFull() {
        assertThat(GpumemCli.commandLine(new String[] {"replay", "--help"}).getSubcommands())
                .containsOnlyKeys("help", "replay");
        // help on a command, and a typo's suggestions, need every command
        assertThat(GpumemCli.commandLine(new String[] {"help", "replay"}).getSubcommands())
                .hasSize(12);
        assertThat(out(GpumemCli.commandLine(new String[] {"help", "replay"}), "help", "replay"))
                .isEqualTo(out(GpumemCli.commandLine(new String[] {"replay", "--help"}), "replay", "--help"))
                .contains("--check");
        // the stubs carry no options: they are registered only for runs that print the top-level usage
        assertThat(GpumemCli.commandLine(new String[] {"--help"})
                        .getSubcommands()
                        .get("replay")
                        .getCommandSpec()
                        .options())
                .isEmpty();
    }

    /** The launcher's archive training runs every command it names successfully and leaves no file behind. */
    @Test
    void archiveTrainingRunsItsCommandsAndCleansUp(@TempDir Path tmp) throws Exception {
        Path scratch = tmp.resolve("training");
        ArchiveTraining.train(scratch);
        assertThat(scratch).doesNotExist();
        try (var left = Files.list(tmp)) {
            assertThat(left).isEmpty();
        }
    }

    /** What {@code gpumem replay} prints and returns for {@code failure} thrown by the command. */
    private static String[] failure(Exception failure) {
        CommandLine replay =
                GpumemCli.commandLine(new String[] {"replay"}).getSubcommands().get("replay");
        StringWriter err = new StringWriter();
        replay.setErr(new PrintWriter(err, true));
        int exit = GpumemCli.reportFailure(failure, replay);
        return new String[] {Integer.toString(exit), err.toString().strip()};
    }

    @Test
    void aBugIsAnInternalErrorNamingTheExceptionAndWhereAndInputIsNot() {
        NullPointerException npe = new NullPointerException("Cannot read field \"size\" because \"b\" is null");
        npe.setStackTrace(new StackTraceElement[] {
            new StackTraceElement("io.gpumem.alloc.BlockPool", "take", "BlockPool.java", 42)
        });
        String[] bug = failure(npe);
        assertThat(bug[0]).isEqualTo(Integer.toString(GpumemCli.INTERNAL_ERROR));
        assertThat(bug[1])
                .isEqualTo("gpumem replay: internal error, a bug in gpumem: java.lang.NullPointerException: Cannot"
                        + " read field \"size\" because \"b\" is null at io.gpumem.alloc.BlockPool.take(BlockPool.java:42);"
                        + " please report it with the command line that raised it");
        assertThat(bug[1]).doesNotContain("\n");
        for (Exception b : new Exception[] {
            new ArrayIndexOutOfBoundsException(7), new ClassCastException(), new ArithmeticException("/ by zero")
        }) {
            assertThat(failure(b)[0]).as(b.toString()).isEqualTo("3");
            assertThat(failure(b)[1]).contains("internal error", b.getClass().getName());
        }

        for (Exception input : new Exception[] {
            new IllegalArgumentException("policy nope is not registered"),
            new IllegalStateException("the window cannot be rebuilt"),
            new UncheckedIOException("out.html: cannot write", new IOException("No space left on device"))
        }) {
            String[] r = failure(input);
            assertThat(r[0]).as(input.toString()).isEqualTo("2");
            assertThat(r[1]).isEqualTo("gpumem replay: " + input.getMessage());
        }
        assertThat(failure(new UnsupportedOperationException())[1])
                .as("no message: the exception names itself")
                .isEqualTo("gpumem replay: java.lang.UnsupportedOperationException");
    }
}
