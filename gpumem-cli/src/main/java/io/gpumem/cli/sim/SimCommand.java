package io.gpumem.cli.sim;

import io.gpumem.config.AllocatorConfig;
import io.gpumem.script.OpsScript;
import io.gpumem.script.ScriptException;
import io.gpumem.script.ScriptOp;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.PrintWriter;
import java.io.Reader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.util.concurrent.Callable;
import java.util.function.BiFunction;
import picocli.CommandLine.Command;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.Parameters;
import picocli.CommandLine.Spec;

/**
 * {@code gpumem sim}: runs an ops script (see {@link OpsScript}) on the caching allocator over a simulated
 * device and prints the summaries and statistics it asks for.
 *
 * <p>The whole script is read and checked before anything runs, so a malformed line, an unknown name or a
 * double free stops with {@code gpumem sim: line N: ...} and exit status 2 without any output. An OOM prints
 * PyTorch's message on standard error and the script goes on (or stops with status 1 under
 * {@code --fail-on-oom}).
 */
@Command(name = "sim", mixinStandardHelpOptions = true,
        description = "Run an ops script (alloc/free/record_stream/empty_cache/... lines) on the caching allocator"
                + " over a simulated device; print memory_summary and memory_stats on request.",
        footer = {"", "Script format: see gpumem-cli/README-sim.md. Exit status: 0 done, 1 OOM with --fail-on-oom"
                + " or an internal failure, 2 bad script."})
public final class SimCommand implements Callable<Integer> {

    @Parameters(index = "0", arity = "0..1", paramLabel = "SCRIPT",
            description = "Ops script file; standard input when absent or '-'.")
    String script;

    @Option(names = "--fail-on-oom", description = "Stop at the first out-of-memory error with exit status 1.")
    boolean failOnOom;

    @Spec
    CommandSpec spec;

    private final BiFunction<ScriptOp.Device, AllocatorConfig, SimTarget> factory;

    public SimCommand() {
        this(AllocatorSimTarget::create);
    }

    SimCommand(BiFunction<ScriptOp.Device, AllocatorConfig, SimTarget> factory) {
        this.factory = factory;
    }

    @Override
    public Integer call() {
        PrintWriter out = spec.commandLine().getOut();
        PrintWriter err = spec.commandLine().getErr();
        OpsScript ops;
        try (Reader in = open()) {
            ops = OpsScript.parse(in);
        } catch (ScriptException e) {
            err.println("gpumem sim: " + e.getMessage());
            err.flush();
            return 2;
        } catch (NoSuchFileException e) {
            err.println("gpumem sim: " + script + ": no such file");
            err.flush();
            return 2;
        } catch (IOException e) {
            err.println("gpumem sim: " + (script == null ? "standard input" : script) + ": " + e.getMessage());
            err.flush();
            return 2;
        }
        return new SimRunner(out, err, failOnOom, factory).run(ops);
    }

    private Reader open() throws IOException {
        if (script == null || script.equals("-")) {
            // Not closed by us in spirit: closing System.in's reader is harmless at the end of a CLI run.
            return new InputStreamReader(System.in, StandardCharsets.UTF_8) {
                @Override
                public void close() {
                }
            };
        }
        return Files.newBufferedReader(Path.of(script), StandardCharsets.UTF_8);
    }
}
