package io.gpumem.cli;

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
        subcommands = {
            CommandLine.HelpCommand.class,
            io.gpumem.cli.sim.SimCommand.class,
            io.gpumem.cli.device.DeviceCommand.class,
            io.gpumem.cli.kv.KvSimCommand.class,
            io.gpumem.cli.trace.ReplayCommand.class,
            io.gpumem.cli.trace.CompareCommand.class,
            io.gpumem.cli.analysis.AnalyzeCommand.class,
            io.gpumem.cli.analysis.DemoCommand.class,
            io.gpumem.cli.report.ReportCommand.class,
        })
public final class GpumemCli implements Runnable {

    @CommandLine.Spec
    CommandLine.Model.CommandSpec spec;

    @Override
    public void run() {
        spec.commandLine().usage(System.out);
    }

    /** Builds the command line with gpumem's exception handling; used by {@link #main} and by tests. */
    public static CommandLine commandLine() {
        CommandLine cl = new CommandLine(new GpumemCli());
        cl.setExecutionExceptionHandler((ex, commandLine, parseResult) -> {
            commandLine.getErr().println("gpumem: " + (ex.getMessage() == null ? ex.toString() : ex.getMessage()));
            return 2;
        });
        return cl;
    }

    public static void main(String[] args) {
        System.exit(commandLine().execute(args));
    }
}
