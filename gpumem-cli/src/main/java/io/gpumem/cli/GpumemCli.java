package io.gpumem.cli;

import java.util.Arrays;
import picocli.CommandLine;
import picocli.CommandLine.Command;

/**
 * Entry point of the {@code gpumem} command. Each subcommand lives in the package of its concern
 * (simulation, traces, KV cache, CUDA) and is registered here; this class only wires them and maps
 * failures to exit codes: 0 success, 1 the work failed (e.g. an OOM the user asked to treat as fatal),
 * 2 bad input (malformed script, corrupt file, bad option).
 */
@Command(
        name = "gpumem",
        mixinStandardHelpOptions = true,
        version = "gpumem 0.1.0",
        description = "GPU memory manager and fragmentation toolkit (PyTorch-exact caching allocator on a simulated or CUDA device).",
        subcommands = CommandLine.HelpCommand.class)
public final class GpumemCli implements Runnable {

    /**
     * The subcommands in the order {@code --help} lists them. They are registered here rather than in the
     * {@code @Command} annotation so that a run of one subcommand builds the picocli model of that one only:
     * picocli reflects over every option of every registered command up front, which was about a fifth of the
     * CPU time of a short command such as {@code gpumem replay --check} on a small trace.
     */
    private static final String[] SUBCOMMANDS =
            {"sim", "device", "kv-sim", "replay", "compare", "analyze", "demo", "report", "plan"};

    private static Object newSubcommand(String name) {
        return switch (name) {
            case "sim" -> new io.gpumem.cli.sim.SimCommand();
            case "device" -> new io.gpumem.cli.device.DeviceCommand();
            case "kv-sim" -> new io.gpumem.cli.kv.KvSimCommand();
            case "replay" -> new io.gpumem.cli.trace.ReplayCommand();
            case "compare" -> new io.gpumem.cli.trace.CompareCommand();
            case "analyze" -> new io.gpumem.cli.analysis.AnalyzeCommand();
            case "demo" -> new io.gpumem.cli.analysis.DemoCommand();
            case "report" -> new io.gpumem.cli.report.ReportCommand();
            case "plan" -> new io.gpumem.cli.plan.PlanCommand();
            default -> throw new IllegalArgumentException("no subcommand " + name);
        };
    }

    @CommandLine.Spec
    CommandLine.Model.CommandSpec spec;

    @Override
    public void run() {
        spec.commandLine().usage(System.out);
    }

    /** Builds the command line with every subcommand and gpumem's exception handling; used by tests. */
    public static CommandLine commandLine() {
        return commandLine(null);
    }

    /**
     * Builds the command line for a run whose first argument is {@code first}: when that names a subcommand,
     * only that one is registered (its parse, help and errors are the same, since picocli resolves a
     * subcommand's options without its siblings); otherwise (no argument, an option, {@code help}, a typo) all
     * of them, so that the top-level usage and "did you mean" suggestions list every command.
     */
    static CommandLine commandLine(String first) {
        CommandLine cl = new CommandLine(new GpumemCli());
        boolean one = Arrays.asList(SUBCOMMANDS).contains(first);
        for (String name : SUBCOMMANDS) {
            if (!one || name.equals(first)) {
                cl.addSubcommand(name, newSubcommand(name));
            }
        }
        // Every error reads "gpumem COMMAND: message" (exit 2, no stack trace), whoever raised it: a bad option or
        // SIZE (picocli's parse), or an exception a command did not handle itself (unreadable input).
        cl.setParameterExceptionHandler((ex, args) -> {
            CommandLine failed = ex.getCommandLine();
            failed.getErr().println(prefix(failed) + ex.getMessage() + " (see " + name(failed) + " --help)");
            return 2;
        });
        cl.setExecutionExceptionHandler((ex, commandLine, parseResult) -> {
            commandLine.getErr().println(prefix(commandLine) + (ex.getMessage() == null ? ex.toString() : ex.getMessage()));
            return 2;
        });
        return cl;
    }

    /** {@code gpumem} or {@code gpumem COMMAND}. */
    private static String name(CommandLine cl) {
        return cl.getParent() == null ? "gpumem" : "gpumem " + cl.getCommandName();
    }

    private static String prefix(CommandLine cl) {
        return name(cl) + ": ";
    }

    public static void main(String[] args) {
        int exit;
        try {
            exit = commandLine(args.length == 0 ? null : args[0]).execute(args);
        } catch (OutOfMemoryError e) {
            // Inputs are bounded up front; if one still is not, say so in one line rather than a stack trace.
            System.err.println("gpumem: out of memory (" + e.getMessage() + "); raise the heap with GPUMEM_JAVA_OPTS=-Xmx...");
            exit = 2;
        }
        System.exit(exit);
    }
}
