package io.gpumem.cli.sim;

import io.gpumem.config.AllocatorConfig;
import io.gpumem.script.OpsScript;
import io.gpumem.script.ScriptOp;
import io.gpumem.stats.MemorySummary;
import io.gpumem.trace.io.AllocatorSnapshots;
import java.io.IOException;
import java.io.PrintWriter;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.Locale;
import java.util.Map;
import java.util.TreeMap;
import java.util.function.BiFunction;

/**
 * Runs a parsed {@link OpsScript} against a {@link SimTarget} and prints what the script asks for.
 *
 * <p>The target is created lazily, at the first op that needs the allocator, from the {@code device} line
 * and the script's {@link OpsScript#initialConfig()} (the config lines before that op, folded as PyTorch
 * re-parses them; the trace reader records a script's configuration by the same rule): those early config lines
 * play the role of the
 * {@code PYTORCH_CUDA_ALLOC_CONF} environment variable (read once, when PyTorch creates the allocator), later
 * ones that of {@code _set_allocator_settings}. Names map to the pointers their {@code alloc} returned; an
 * allocation that ran out of memory leaves its name "failed", and a later {@code free} or
 * {@code record_stream} of it is skipped with a note on standard error, the way a PyTorch program never gets
 * a tensor to free.
 *
 * <p>Each op's output is built completely before it is printed, so a failure never leaves half a table.
 * Exit status: 0, or 1 when the target fails unexpectedly or, with {@code failOnOom}, at the first OOM.
 */
final class SimRunner {
    private final PrintWriter out;
    private final PrintWriter err;
    private final boolean failOnOom;
    private final BiFunction<ScriptOp.DeviceSettings, AllocatorConfig, SimTarget> factory;

    private SimTarget target;
    private final Map<String, Long> pointers = new HashMap<>();
    private final Map<String, Integer> failed = new HashMap<>();

    /**
     * @param factory builds the target from the script's device line (null when absent) and the config that
     *                the script set before its first allocator op
     */
    SimRunner(
            PrintWriter out,
            PrintWriter err,
            boolean failOnOom,
            BiFunction<ScriptOp.DeviceSettings, AllocatorConfig, SimTarget> factory) {
        this.out = out;
        this.err = err;
        this.failOnOom = failOnOom;
        this.factory = factory;
    }

    int run(OpsScript script) {
        for (ScriptOp op : script.ops()) {
            try {
                if (!step(script, op)) {
                    return 1;
                }
            } catch (RuntimeException e) {
                // Static checks make this unreachable for well-formed scripts; a failure here is the target's.
                err.println("gpumem sim: line " + op.line() + ": " + describe(op) + " failed: "
                        + (e.getMessage() == null ? e.toString() : e.getMessage()));
                err.flush();
                return 1;
            } finally {
                out.flush();
                err.flush();
            }
        }
        return 0;
    }

    /** Runs one op; false to stop the script (an OOM with {@code failOnOom}). */
    private boolean step(OpsScript script, ScriptOp op) {
        switch (op) {
            case ScriptOp.DeviceSettings d -> {
                // Applied when the target is created.
            }
            case ScriptOp.Config c -> {
                // before the target exists (before the first allocator op) the line is part of
                // script.initialConfig(), which the target is created with
                if (target != null) {
                    target.apply(c);
                }
            }
            case ScriptOp.Alloc a -> {
                try {
                    pointers.put(a.name(), target(script).malloc(a.size(), a.stream()));
                    failed.remove(a.name());
                } catch (SimTarget.OutOfMemory oom) {
                    failed.put(a.name(), a.line());
                    err.println("gpumem sim: line " + a.line() + ": alloc " + a.name() + ": " + oom.getMessage());
                    return !failOnOom;
                }
            }
            case ScriptOp.Free f -> {
                Long ptr = pointer(f.name(), f.line(), "free");
                if (ptr != null) {
                    target(script).free(ptr);
                    pointers.remove(f.name());
                }
                failed.remove(f.name());
            }
            case ScriptOp.RecordStream r -> {
                Long ptr = pointer(r.name(), r.line(), "record_stream");
                if (ptr != null) {
                    target(script).recordStream(ptr, r.stream());
                }
            }
            case ScriptOp.CompleteEvents _, ScriptOp.EmptyCache _, ScriptOp.SetFraction _, ScriptOp.ResetPeak _ ->
                target(script).apply(op);
            case ScriptOp.Summary s -> {
                SimTarget t = target(script);
                out.print(MemorySummary.format(t.memoryStats().toPyTorchMap(), t.deviceIndex(), s.abbreviated()));
            }
            case ScriptOp.Snapshot s -> {
                return writeSnapshot(target(script), s);
            }
            case ScriptOp.Stats s -> {
                StringBuilder sb = new StringBuilder();
                // PyTorch's memory_stats() dict, one "key value" line per key in key order
                for (Map.Entry<String, Long> e :
                        new TreeMap<>(target(script).memoryStats().toPyTorchMap()).entrySet()) {
                    sb.append(e.getKey()).append(' ').append(e.getValue()).append('\n');
                }
                out.print(sb);
            }
        }
        return true;
    }

    /** The pointer bound to a name, or null (with a note) when its allocation ran out of memory. */
    private Long pointer(String name, int line, String verb) {
        Long ptr = pointers.get(name);
        if (ptr == null) {
            Integer oomLine = failed.get(name);
            err.println("gpumem sim: line " + line + ": " + verb + " " + name + " skipped: its allocation on line "
                    + oomLine + " ran out of memory");
        }
        return ptr;
    }

    private SimTarget target(OpsScript script) {
        if (target == null) {
            target = factory.apply(script.device(), script.initialConfig());
            if (script.ops().stream().anyMatch(op -> op instanceof ScriptOp.Snapshot)) {
                target.recordHistory();
            }
        }
        return target;
    }

    /** {@code snapshot FILE}: PyTorch's current snapshot format, written atomically; false if it cannot be. */
    private boolean writeSnapshot(SimTarget t, ScriptOp.Snapshot s) {
        Path file = Path.of(s.file());
        try {
            AllocatorSnapshots.write(t.snapshot(), file);
        } catch (IOException | RuntimeException e) {
            err.println("gpumem sim: line " + s.line() + ": snapshot " + s.file() + ": cannot write: "
                    + (e.getMessage() == null ? e.toString() : e.getMessage()));
            return false;
        }
        return true;
    }

    private static String describe(ScriptOp op) {
        return switch (op) {
            case ScriptOp.Alloc a -> "alloc " + a.name();
            case ScriptOp.Free f -> "free " + f.name();
            case ScriptOp.RecordStream r -> "record_stream " + r.name();
            default ->
                op.getClass()
                        .getSimpleName()
                        .replaceAll("([a-z])([A-Z])", "$1_$2")
                        .toLowerCase(Locale.ROOT);
        };
    }
}
