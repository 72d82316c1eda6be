package io.gpumem.cli.plan;

import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonGenerator;
import io.gpumem.cli.GpumemCommand;
import io.gpumem.cli.options.BadInputException;
import io.gpumem.cli.options.OutputFile;
import io.gpumem.cli.options.ReadLimitOptions;
import io.gpumem.cli.options.TraceDeviceOption;
import io.gpumem.plan.LifetimeProblem;
import io.gpumem.plan.OffsetPlan;
import io.gpumem.plan.OffsetPlanner;
import io.gpumem.trace.io.OutputFiles;
import io.gpumem.trace.plan.PlanFiles;
import java.io.IOException;
import java.io.OutputStreamWriter;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.io.UncheckedIOException;
import java.io.Writer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.Locale;
import picocli.CommandLine.Command;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Option;
import picocli.CommandLine.Parameters;

/**
 * {@code gpumem plan FILE [--json] [--out CSV] [--target-ratio R] [--repeat N]}: solves the static allocation problem of a trace's
 * in-window buffers or of an interval CSV ({@code id,lower,upper,size}, MiniMalloc's format) with
 * {@link OffsetPlanner} and reports the planned peak against the peak live bytes. {@code --out} writes the plan
 * as {@code id,lower,upper,size,offset} (written to a temporary file and moved into place, so a failure leaves
 * nothing half-written). {@code --repeat} solves N times and reports the fastest and median solve time, the
 * command-line benchmark of the planner.
 */
@Command(
        name = "plan",
        mixinStandardHelpOptions = true,
        description = {
            "Plan offsets for a trace's buffers (or a lifetime CSV id,lower,upper,size) so that buffers"
                    + " live at the same time never overlap, minimising the planned peak; compare it with the peak live"
                    + " bytes (the lower bound)."
        })
public final class PlanCommand extends GpumemCommand {

    @Parameters(
            index = "0",
            paramLabel = "FILE",
            description = "Lifetime CSV (id,lower,upper,size[,offset]) or any"
                    + " trace gpumem reads (PyTorch snapshot pickle, RMM log, ops script): its busiest device's in-window"
                    + " buffers, or --trace-device's.")
    Path file;

    @Mixin
    TraceDeviceOption traceDevice;

    @Option(names = "--json", description = "Print one JSON object: buffers, peak_live, planned_peak, ratio, solve_ms.")
    boolean json;

    @Option(names = "--out", paramLabel = "CSV", description = "Write the plan as id,lower,upper,size,offset.")
    Path out;

    @Option(
            names = "--align",
            paramLabel = "BYTES",
            defaultValue = "512",
            description = "Round sizes up to this power of two before placing (default: ${DEFAULT-VALUE}).")
    long align;

    @Option(
            names = "--budget-ms",
            paramLabel = "MS",
            description = "Work the improvement search may do when the first orders miss the bound, in"
                    + " milliseconds of a quiet 2-core machine; counted, not timed, so the plan never depends on"
                    + " the machine's load (default: ${DEFAULT-VALUE}).")
    long budgetMs = OffsetPlanner.DEFAULT_BUDGET_MS;

    @Option(
            names = "--target-ratio",
            paramLabel = "R",
            description = "Stop improving once planned peak <= floor(peak live x R); R >= 1.0, 1.0 searches for the"
                    + " exact lower bound (default: ${DEFAULT-VALUE}).")
    double targetRatio = OffsetPlanner.DEFAULT_TARGET_RATIO;

    @Option(
            names = "--repeat",
            paramLabel = "N",
            defaultValue = "1",
            description = "Solve N times and report the fastest and the median solve time (default: ${DEFAULT-VALUE}).")
    int repeat;

    @Mixin
    ReadLimitOptions limits;

    @Override
    public Integer call() {
        PrintWriter stdout = out();
        if (align <= 0 || Long.bitCount(align) != 1) {
            throw new BadInputException("--align must be a positive power of two, got " + align);
        }
        if (budgetMs < 0 || repeat < 1) {
            throw new BadInputException("--budget-ms must be >= 0 and --repeat >= 1");
        }
        if (!(targetRatio >= 1.0) || Double.isInfinite(targetRatio)) {
            throw new BadInputException("--target-ratio must be a finite number >= 1.0, got " + targetRatio);
        }
        if (out != null) {
            OutputFile.check("--out", out, file);
        }
        // errors name the file, line and field (TraceFormatException), reported like every command's bad input
        LifetimeProblem problem = PlanFiles.read(file, limits.limits(), align, traceDevice.orElse(() -> -1));
        OffsetPlanner planner = new OffsetPlanner(budgetMs, OffsetPlanner.DEFAULT_MAX_ROUNDS, targetRatio);
        OffsetPlan plan = null;
        long[] times = new long[repeat];
        for (int r = 0; r < repeat; r++) {
            plan = planner.plan(problem);
            times[r] = plan.solveNanos();
        }
        Arrays.sort(times);
        if (out != null) {
            try {
                writeAtomically(plan, out);
            } catch (IOException e) {
                throw new UncheckedIOException("cannot write " + out + ": " + OutputFiles.reason(e), e);
            }
        }
        double solveMs = (repeat == 1 ? plan.solveNanos() : times[repeat / 2]) / 1e6;
        if (json) {
            stdout.println(json(plan, solveMs, repeat > 1 ? times[0] / 1e6 : solveMs));
        } else {
            stdout.printf(
                    Locale.ROOT,
                    "%s: %d buffers, peak live %d B, planned peak %d B, ratio %.5f, solve %.1f ms" + "%s (%s)%n",
                    file,
                    problem.buffers(),
                    plan.peakLive(),
                    plan.plannedPeak(),
                    plan.ratio(),
                    solveMs,
                    repeat > 1
                            ? String.format(Locale.ROOT, " median of %d, fastest %.1f ms", repeat, times[0] / 1e6)
                            : "",
                    plan.method().isEmpty() ? "empty" : plan.method());
        }
        stdout.flush();
        return 0;
    }

    private static void writeAtomically(OffsetPlan plan, Path target) throws IOException {
        OutputFiles.replace(target, out -> {
            Writer w = new OutputStreamWriter(out, StandardCharsets.UTF_8);
            PlanFiles.write(plan, w);
            w.flush();
        });
    }

    static String json(OffsetPlan plan, double solveMs, double fastestMs) {
        StringWriter w = new StringWriter();
        try (JsonGenerator g = new JsonFactory().createGenerator(w)) {
            g.writeStartObject();
            g.writeNumberField("buffers", plan.problem().buffers());
            g.writeNumberField("peak_live", plan.peakLive());
            g.writeNumberField("planned_peak", plan.plannedPeak());
            g.writeNumberField("ratio", plan.ratio());
            g.writeNumberField("solve_ms", solveMs);
            g.writeNumberField("fastest_ms", fastestMs);
            g.writeStringField("method", plan.method());
            g.writeEndObject();
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
        return w.toString();
    }
}
