package io.gpumem.cli.sim;

import io.gpumem.cli.GpumemCommand;
import io.gpumem.cli.device.DeviceOptions;
import io.gpumem.cli.options.BadInputException;
import io.gpumem.cli.options.OutputFile;
import io.gpumem.device.Device;
import io.gpumem.script.OpsScript;
import io.gpumem.script.ScriptOp;
import java.io.BufferedInputStream;
import java.io.FilterInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.PrintWriter;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import picocli.CommandLine.Command;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Option;
import picocli.CommandLine.Parameters;

/**
 * {@code gpumem sim}: runs an ops script (see {@link OpsScript}) on the caching allocator over a simulated
 * device and prints the summaries and statistics it asks for.
 *
 * <p>The whole script is read and checked before anything runs, so a malformed line, an unknown name or a
 * double free stops with {@code gpumem sim: line N: ...} and exit status 2 without any output. An OOM prints
 * PyTorch's message on standard error and the script goes on (or stops with status 1 under
 * {@code --fail-on-oom}).
 *
 * <p>With {@code --device cuda} the same script runs on a real GPU through the CUDA driver; a script's
 * {@code device} line describes a simulated device and is refused there. The command owns the opened device
 * and closes it when the script ends.
 */
@Command(
        name = "sim",
        mixinStandardHelpOptions = true,
        description = "Run an ops script (alloc/free/record_stream/empty_cache/... lines) on the caching allocator"
                + " over a simulated device (or a real GPU with --device cuda); print memory_summary and"
                + " memory_stats on request.",
        footer = {
            "",
            "Script format: see gpumem-cli/README-sim.md. Exit status: 0 done, 1 OOM with --fail-on-oom"
                    + " or an internal failure, 2 bad script."
        })
public final class SimCommand extends GpumemCommand {

    @Parameters(
            index = "0",
            arity = "0..1",
            paramLabel = "SCRIPT",
            description = "Ops script file; standard input when absent or '-'.")
    String script;

    @Option(names = "--fail-on-oom", description = "Stop at the first out-of-memory error with exit status 1.")
    boolean failOnOom;

    @Mixin
    DeviceOptions device;

    @Override
    public Integer call() {
        PrintWriter out = out();
        PrintWriter err = err();
        OpsScript ops;
        if (script != null && script.isEmpty()) {
            // Path.of("") is the working directory: the system's "Is a directory" would name no file at all
            throw new BadInputException("the script's file name is empty (name a file, or '-' for standard input)");
        }
        // a malformed script is a ScriptException naming the line; GpumemCli reports it (exit 2)
        try (InputStream in = open()) {
            ops = OpsScript.parse(in);
        } catch (NoSuchFileException e) {
            throw new BadInputException(script + ": no such file", e);
        } catch (IOException e) {
            throw new BadInputException((script == null ? "standard input" : script) + ": " + e.getMessage(), e);
        }
        checkSnapshotFiles(ops);
        if (!device.isCuda()) {
            return new SimRunner(out, err, failOnOom, AllocatorSimTarget::onSimulatedDevice).run(ops);
        }
        if (ops.device() != null) {
            throw new BadInputException("line " + ops.device().line() + ": a device line describes the simulated"
                    + " device; remove it to run on --device cuda");
        }
        // an unusable device is a DeviceUnavailableException (exit 2, like `gpumem device` and gpu-check: the
        // requested device cannot be used at all)
        Device gpu = device.open(() -> {
            throw new IllegalStateException("unreachable: --device cuda was checked");
        });
        try {
            return new SimRunner(out, err, failOnOom, (spec, config) -> AllocatorSimTarget.onDevice(gpu, config))
                    .run(ops);
        } finally {
            try {
                gpu.close();
            } catch (RuntimeException e) {
                err.println("gpumem sim: closing the device: " + e.getMessage());
                err.flush();
            }
        }
    }

    /**
     * Refuses, before anything runs, a {@code snapshot} line whose file cannot be written: its directory missing,
     * the path a directory, or the script itself (the rules of every command's output file, {@link OutputFile}).
     */
    private void checkSnapshotFiles(OpsScript ops) {
        Path input = script == null || script.equals("-") ? null : Path.of(script);
        for (ScriptOp op : ops.ops()) {
            if (op instanceof ScriptOp.Snapshot s) {
                String problem = OutputFile.problem("snapshot", Path.of(s.file()), input);
                if (problem != null) {
                    throw new BadInputException("line " + s.line() + ": " + problem);
                }
            }
        }
    }

    private InputStream open() throws IOException {
        if (script == null || script.equals("-")) {
            // Standard input belongs to the process: this stream's close leaves it open.
            return new FilterInputStream(System.in) {
                @Override
                public void close() {}
            };
        }
        return new BufferedInputStream(Files.newInputStream(Path.of(script)), 1 << 16);
    }
}
