package io.gpumem.trace.plan;

import io.gpumem.history.TraceAction;
import io.gpumem.history.TraceEntry;
import io.gpumem.plan.LifetimeProblem;
import io.gpumem.plan.OffsetPlan;
import io.gpumem.trace.io.LifetimeCsvReader;
import io.gpumem.trace.io.ReadLimits;
import io.gpumem.trace.io.SourceFormat;
import io.gpumem.trace.io.TraceReaders;
import io.gpumem.trace.io.TraceSnapshot;
import io.gpumem.trace.session.TraceSession;
import java.io.IOException;
import java.io.Writer;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * Reading planning problems and writing plans in MiniMalloc's interval format: input {@code id,lower,upper,size}
 * (also the lifetime CSVs of MindSpore SOMAS / idealloc, read by {@link LifetimeCsvReader}, the one reader of the
 * format), output {@code id,lower,upper,size,offset}; lifetimes are half-open {@code [lower, upper)}. An output
 * file can be read back as input (its offsets are ignored), so two solvers can be checked against each other. Any
 * other trace format gpumem reads (a PyTorch snapshot, an RMM log, an ops script) becomes the in-window buffers of one
 * device, by default its busiest ({@link #ofTrace}).
 */
public final class PlanFiles {

    private PlanFiles() {}

    /** Reads an interval CSV or a trace (its busiest device); errors name the file, line and field. */
    public static LifetimeProblem read(Path file, ReadLimits limits, long alignment) {
        return read(file, limits, alignment, -1);
    }

    /**
     * {@link #read(Path, ReadLimits, long)} of device {@code device} of a trace (the busiest when negative); an
     * interval CSV is device 0.
     *
     * @throws IllegalArgumentException when the file has no trace for {@code device}
     */
    public static LifetimeProblem read(Path file, ReadLimits limits, long alignment, int device) {
        if (TraceReaders.detect(file) == SourceFormat.LIFETIME_CSV) {
            if (device > 0) {
                throw new IllegalArgumentException(
                        file + ": device " + device + " has no trace to plan (a lifetime CSV is device 0)");
            }
            return new LifetimeCsvReader(limits).readProblem(file, alignment);
        }
        TraceSnapshot trace = TraceReaders.read(file, limits);
        int d = device >= 0 ? device : TraceSession.busiestDevice(trace);
        if (d >= trace.deviceTraces().size() || trace.traceOf(d).isEmpty()) {
            throw new IllegalArgumentException(file + ": device " + d + " has no trace to plan");
        }
        return ofTrace(trace, d, alignment);
    }

    /**
     * The in-window buffers of one device's trace: every {@code alloc} entry is a buffer, live from its entry
     * index until the entry that frees it ({@code free_completed}, or {@code free_requested} in a trace that has
     * no completions), or until the end of the window when it is never freed. Blocks allocated before the
     * window are not part of the problem (their placement was decided before it).
     */
    public static LifetimeProblem ofTrace(TraceSnapshot trace, int device, long alignment) {
        List<TraceEntry> entries = trace.traceOf(device);
        boolean hasCompletions = TraceEntry.recordsFreeCompletions(entries);
        int allocs = 0;
        for (TraceEntry e : entries) {
            allocs += e.action() == TraceAction.ALLOC ? 1 : 0;
        }
        long[] lower = new long[allocs];
        long[] upper = new long[allocs];
        long[] size = new long[allocs];
        long[] id = new long[allocs];
        Map<Long, Integer> live = new HashMap<>();
        int k = 0;
        for (int i = 0; i < entries.size(); i++) {
            TraceEntry e = entries.get(i);
            TraceAction a = e.action();
            if (a == TraceAction.ALLOC) {
                id[k] = k;
                lower[k] = i;
                upper[k] = -1;
                size[k] = e.size();
                live.put(e.addr(), k++);
            } else if (a == TraceAction.FREE_COMPLETED || (a == TraceAction.FREE_REQUESTED && !hasCompletions)) {
                Integer b = live.remove(e.addr());
                if (b != null) {
                    upper[b] = i;
                }
            }
        }
        for (int b = 0; b < allocs; b++) {
            if (upper[b] < 0) {
                upper[b] = entries.size();
            }
        }
        return new LifetimeProblem(id, lower, upper, size, alignment);
    }

    /** Writes {@code id,lower,upper,size,offset}, one row per buffer in problem order. */
    public static void write(OffsetPlan plan, Writer out) throws IOException {
        LifetimeProblem p = plan.problem();
        StringBuilder sb = new StringBuilder(64);
        out.write(LifetimeCsvReader.PLAN_COLUMNS);
        out.write('\n');
        for (int i = 0; i < p.buffers(); i++) {
            sb.setLength(0);
            sb.append(p.id(i))
                    .append(',')
                    .append(p.lower(i))
                    .append(',')
                    .append(p.upper(i))
                    .append(',')
                    .append(p.size(i))
                    .append(',')
                    .append(plan.offsets()[i])
                    .append('\n');
            out.write(sb.toString());
        }
    }
}
