package io.gpumem.cli;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.PrintWriter;
import java.io.StringWriter;
import java.nio.file.Files;
import java.nio.file.Path;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The top-level command line: a run builds only the part of picocli's model it can use (start-up time), and
 * what the user sees is the same as with every command's full model.
 */
class GpumemCliTest {

    /** Runs {@code args} on a given command line and returns its standard output. */
    private static String out(picocli.CommandLine cl, String... args) {
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
}
