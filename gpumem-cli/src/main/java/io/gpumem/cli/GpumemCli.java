package io.gpumem.cli;

import io.gpumem.cli.analysis.AnalyzeCommand;
import io.gpumem.cli.analysis.DemoCommand;
import io.gpumem.cli.device.DeviceCommand;
import io.gpumem.cli.kv.KvSimCommand;
import io.gpumem.cli.plan.PlanCommand;
import io.gpumem.cli.report.ReportCommand;
import io.gpumem.cli.sim.SimCommand;
import io.gpumem.cli.trace.CompareCommand;
import io.gpumem.cli.trace.DiffCommand;
import io.gpumem.cli.trace.PredictCommand;
import io.gpumem.cli.trace.ReplayCommand;
import java.io.PrintWriter;
import java.util.Arrays;
import java.util.ConcurrentModificationException;
import java.util.Set;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Model.CommandSpec;

/**
 * Entry point of the {@code gpumem} command. Each subcommand lives in the package of its concern
 * (simulation, traces, KV cache, CUDA) and is registered here; this class only wires them and maps
 * failures to exit codes: 0 success, 1 the work failed (e.g. an OOM the user asked to treat as fatal, or
 * {@code replay --check} finding a placement that differs: a command returns 1 itself, documented on it),
 * 2 bad input (malformed script, corrupt file, bad option), 3 an internal error (a bug in gpumem).
 *
 * <p>Bad input is reported here and nowhere else: a command throws a typed exception and this class prints it as
 * {@code gpumem COMMAND: message} with exit status 2. The types a command throws: picocli's
 * {@code ParameterException} (an option that does not parse; the message adds where to find help),
 * {@code BadInputException} (an option value or combination refused, a device or entry the file lacks),
 * {@code TraceFormatException} (a file that cannot be read, naming the file and the entry or field),
 * {@code InconsistentSnapshotException} (a {@code TraceFormatException} for a file whose contents do not add up), {@code ScriptException} (an ops
 * script line), {@code DeviceUnavailableException} (no usable CUDA device) and {@code UncheckedIOException} (an
 * output that cannot be written). Each message names the file, entry, field or option at fault. Any other
 * exception is reported the same way (its message, exit 2) rather than as a stack trace, except one that only a bug
 * raises (a null dereference, a bad index or cast): that line says "internal error" and where, exit 3
 * ({@link #reportFailure}).
 */
@Command(
        name = "gpumem",
        mixinStandardHelpOptions = true,
        version = "gpumem 0.1.0",
        description =
                "GPU memory manager and fragmentation toolkit (PyTorch-exact caching allocator on a simulated or CUDA device).",
        subcommands = CommandLine.HelpCommand.class)
public final class GpumemCli implements Runnable {

    /**
     * The subcommands in the order {@code --help} lists them. They are registered here rather than in the
     * {@code @Command} annotation so that a run of one subcommand builds the picocli model of that one only:
     * picocli reflects over every option of every registered command up front, which was about a fifth of the
     * CPU time of a short command such as {@code gpumem replay --check} on a small trace.
     */
    private static final String[] SUBCOMMANDS = {
        "sim", "device", "kv-sim", "replay", "compare", "diff", "predict", "analyze", "demo", "report", "plan"
    };

    private static Class<?> subcommandClass(String name) {
        return switch (name) {
            case "sim" -> SimCommand.class;
            case "device" -> DeviceCommand.class;
            case "kv-sim" -> KvSimCommand.class;
            case "replay" -> ReplayCommand.class;
            case "compare" -> CompareCommand.class;
            case "diff" -> DiffCommand.class;
            case "predict" -> PredictCommand.class;
            case "analyze" -> AnalyzeCommand.class;
            case "demo" -> DemoCommand.class;
            case "report" -> ReportCommand.class;
            case "plan" -> PlanCommand.class;
            default -> throw new IllegalArgumentException("no subcommand " + name);
        };
    }

    private static Object newSubcommand(String name) {
        try {
            return subcommandClass(name).getConstructor().newInstance();
        } catch (ReflectiveOperationException e) {
            throw new IllegalStateException("cannot create the " + name + " command", e);
        }
    }

    /**
     * What the top-level usage shows of a subcommand (its name, aliases, header or description, whether hidden),
     * read from its {@code @Command} annotation alone: picocli's full model of a command reflects over all its
     * options, which for the eight commands was a fifth of the CPU time of {@code gpumem --help}.
     */
    private static CommandSpec usageStub(String name) {
        Command c = subcommandClass(name).getAnnotation(Command.class);
        CommandSpec stub = CommandSpec.create().name(name).aliases(c.aliases());
        stub.usageMessage().header(c.header()).description(c.description()).hidden(c.hidden());
        return stub;
    }

    @CommandLine.Spec
    CommandSpec spec;

    @Override
    public void run() {
        spec.commandLine().usage(spec.commandLine().getOut());
    }

    /** Builds the command line with every subcommand in full (as for {@code gpumem help COMMAND}); used by tests. */
    public static CommandLine commandLine() {
        return commandLine(new String[] {"help"});
    }

    /**
     * Builds the command line for a run with these arguments, with only as much of picocli's model as the run
     * can use (its parse, help and errors are the same): when the first argument names a subcommand, only that
     * one is registered, since picocli resolves a subcommand's options without its siblings; when the run can
     * only print the top-level usage or version (no argument, {@code -h}, {@code --help}, {@code -V},
     * {@code --version}), the subcommands are registered as {@linkplain #usageStub stubs} that carry what the
     * usage lists; otherwise ({@code help COMMAND}, a typo, a top-level option with more arguments) all of them,
     * in full, so that help on a command and "did you mean" suggestions work.
     */
    static CommandLine commandLine(String[] args) {
        // picocli registers converters for java.time and java.sql types by reflection, a class lookup and a method
        // lookup for each type in each command's model; no gpumem option has such a type (a new one that needs
        // them must drop this exclusion, or the option fails to convert, which the command's tests would show)
        if (System.getProperty(CONVERTER_EXCLUDES) == null) {
            System.setProperty(CONVERTER_EXCLUDES, "java\\.(sql|time)\\..*");
        }
        CommandLine cl = new CommandLine(new GpumemCli());
        String first = args.length == 0 ? null : args[0];
        boolean one = Arrays.asList(SUBCOMMANDS).contains(first);
        boolean usageOnly = args.length == 0 || (args.length == 1 && USAGE_OR_VERSION.contains(first));
        for (String name : SUBCOMMANDS) {
            if (usageOnly) {
                cl.addSubcommand(name, new CommandLine(usageStub(name)));
            } else if (!one || name.equals(first)) {
                cl.addSubcommand(name, newSubcommand(name));
            }
        }
        // Every error reads "gpumem COMMAND: message" (exit 2, no stack trace), whoever raised it: a bad option or
        // SIZE (picocli's parse), or an exception a command did not handle itself (unreadable input).
        cl.setParameterExceptionHandler((ex, ignored) -> {
            CommandLine failed = ex.getCommandLine();
            failed.getErr().println(prefix(failed) + ex.getMessage() + " (see " + name(failed) + " --help)");
            return 2;
        });
        cl.setExecutionExceptionHandler((ex, commandLine, parseResult) -> reportFailure(ex, commandLine));
        return cl;
    }

    /** The exit status of a failure gpumem itself caused (a bug), not the input: see {@link #reportFailure}. */
    static final int INTERNAL_ERROR = 3;

    /**
     * Reports what a command threw, in one line on its error stream, and returns the exit status. An exception that
     * only a mistake in gpumem's own code raises (a null dereference, a bad cast or index, an arithmetic fault, a
     * collection changed while iterated) is an internal error: exit {@value #INTERNAL_ERROR}, the line saying so with
     * the exception's type and where it was thrown, for a bug report. Anything else a command throws is taken to be
     * about the input or the environment (the typed exceptions above, and the argument and state refusals of the
     * library's own checks): its message, exit 2.
     */
    static int reportFailure(Exception ex, CommandLine commandLine) {
        PrintWriter err = commandLine.getErr();
        if (isBug(ex)) {
            StackTraceElement[] where = ex.getStackTrace();
            err.println(prefix(commandLine) + "internal error, a bug in gpumem: " + ex
                    + (where.length > 0 ? " at " + where[0] : "")
                    + "; please report it with the command line that raised it");
            return INTERNAL_ERROR;
        }
        err.println(prefix(commandLine) + (ex.getMessage() == null ? ex.toString() : ex.getMessage()));
        return 2;
    }

    private static boolean isBug(Exception ex) {
        return ex instanceof NullPointerException
                || ex instanceof ClassCastException
                || ex instanceof IndexOutOfBoundsException
                || ex instanceof ArithmeticException
                || ex instanceof ArrayStoreException
                || ex instanceof NegativeArraySizeException
                || ex instanceof ConcurrentModificationException;
    }

    private static final String CONVERTER_EXCLUDES = "picocli.converters.excludes";

    /** The top-level arguments that, alone, print the usage or the version and run no subcommand. */
    private static final Set<String> USAGE_OR_VERSION = Set.of("-h", "--help", "-V", "--version");

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
            exit = commandLine(args).execute(args);
        } catch (OutOfMemoryError e) {
            // Inputs are bounded up front; if one still is not, say so in one line rather than a stack trace.
            System.err.println(
                    "gpumem: out of memory (" + e.getMessage() + "); raise the heap with GPUMEM_JAVA_OPTS=-Xmx...");
            exit = 2;
        }
        System.exit(exit);
    }
}
