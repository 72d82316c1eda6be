package io.gpumem.trace.plan;

import io.gpumem.history.TraceAction;
import io.gpumem.history.TraceEntry;
import io.gpumem.plan.LifetimeProblem;
import io.gpumem.plan.OffsetPlan;
import io.gpumem.trace.io.ReadLimits;
import io.gpumem.trace.io.TraceFormatException;
import io.gpumem.trace.io.TraceReaders;
import io.gpumem.trace.io.TraceSnapshot;
import io.gpumem.trace.session.TraceSession;
import java.io.BufferedReader;
import java.io.IOException;
import java.io.Writer;
import java.nio.charset.MalformedInputException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * Reading planning problems and writing plans in MiniMalloc's interval format: input {@code id,lower,upper,size}
 * (also the lifetime CSVs of MindSpore SOMAS / idealloc), output {@code id,lower,upper,size,offset}; lifetimes are
 * half-open {@code [lower, upper)}. An output file can be read back as input (its offsets are ignored), so two
 * solvers can be checked against each other. Any other trace format gpumem reads (a PyTorch snapshot, an RMM log,
 * an ops script) becomes the in-window buffers of its busiest device ({@link #ofTrace}).
 */
public final class PlanFiles {

    private static final String[] INPUT = {"id", "lower", "upper", "size"};
    private static final String[] OUTPUT = {"id", "lower", "upper", "size", "offset"};

    private PlanFiles() {}

    /** Reads an interval CSV or a trace; errors name the file, line and field. */
    public static LifetimeProblem read(Path file, ReadLimits limits, long alignment) {
        if (isIntervalCsv(file)) {
            return readIntervals(file, limits, alignment);
        }
        TraceSnapshot trace = TraceReaders.read(file, limits);
        return ofTrace(trace, TraceSession.busiestDevice(trace), alignment);
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

    private static boolean isIntervalCsv(Path file) {
        String name = file.toString();
        try (BufferedReader r = Files.newBufferedReader(file, StandardCharsets.ISO_8859_1)) {
            String line;
            while ((line = r.readLine()) != null) {
                String t = line.strip();
                if (!t.isEmpty() && !t.startsWith("#")) {
                    String[] f = fields(t);
                    return matches(f, INPUT) || matches(f, OUTPUT);
                }
            }
            return false;
        } catch (NoSuchFileException e) {
            throw new TraceFormatException(name, "", "no such file");
        } catch (IOException e) {
            throw new TraceFormatException(name, "", "cannot read: " + e.getMessage(), e);
        }
    }

    private static LifetimeProblem readIntervals(Path file, ReadLimits limits, long alignment) {
        String name = file.toString();
        long[] id = new long[1024];
        long[] lower = new long[1024];
        long[] upper = new long[1024];
        long[] size = new long[1024];
        int n = 0;
        try {
            if (Files.size(file) > limits.maxFileBytes()) {
                throw new TraceFormatException(
                        name, "", "file is over the limit of " + limits.maxFileBytes() + " bytes");
            }
        } catch (IOException e) {
            throw new TraceFormatException(name, "", "cannot read: " + e.getMessage(), e);
        }
        try (BufferedReader r = Files.newBufferedReader(file, StandardCharsets.UTF_8)) {
            String text;
            int line = 0;
            int columns = -1;
            while ((text = r.readLine()) != null) {
                line++;
                String t = text.strip();
                if (t.isEmpty() || t.startsWith("#")) {
                    continue;
                }
                String[] f = fields(t);
                if (columns < 0) {
                    columns = f.length;
                    continue;
                }
                if (f.length != columns) {
                    throw new TraceFormatException(
                            name, "line " + line, "expected " + columns + " fields, got " + f.length);
                }
                if (n >= limits.maxEntries()) {
                    throw new TraceFormatException(
                            name, "line " + line, "more than " + limits.maxEntries() + " rows (limit)");
                }
                if (n == id.length) {
                    id = Arrays.copyOf(id, 2 * n);
                    lower = Arrays.copyOf(lower, 2 * n);
                    upper = Arrays.copyOf(upper, 2 * n);
                    size = Arrays.copyOf(size, 2 * n);
                }
                id[n] = number(name, line, "id", f[0]);
                lower[n] = number(name, line, "lower", f[1]);
                upper[n] = number(name, line, "upper", f[2]);
                size[n] = number(name, line, "size", f[3]);
                if (lower[n] < 0 || upper[n] < lower[n]) {
                    throw new TraceFormatException(
                            name,
                            "line " + line + ", field upper",
                            "lifetime [" + lower[n] + ", " + upper[n]
                                    + ") is not a half-open interval of non-negative times");
                }
                if (size[n] <= 0) {
                    throw new TraceFormatException(
                            name, "line " + line + ", field size", "size must be positive, got " + size[n]);
                }
                n++;
            }
        } catch (MalformedInputException e) {
            throw new TraceFormatException(name, "", "not a text file (invalid UTF-8)", e);
        } catch (IOException e) {
            throw new TraceFormatException(name, "", "cannot read: " + e.getMessage(), e);
        }
        return new LifetimeProblem(
                Arrays.copyOf(id, n),
                Arrays.copyOf(lower, n),
                Arrays.copyOf(upper, n),
                Arrays.copyOf(size, n),
                alignment);
    }

    /** Writes {@code id,lower,upper,size,offset}, one row per buffer in problem order. */
    public static void write(OffsetPlan plan, Writer out) throws IOException {
        LifetimeProblem p = plan.problem();
        StringBuilder sb = new StringBuilder(64);
        out.write(String.join(",", OUTPUT));
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

    private static long number(String file, int line, String field, String s) {
        try {
            return Long.parseLong(s);
        } catch (NumberFormatException e) {
            throw new TraceFormatException(
                    file,
                    "line " + line + ", field " + field,
                    "expected an integer, got '" + (s.length() > 40 ? s.substring(0, 37) + "..." : s) + "'");
        }
    }

    private static String[] fields(String line) {
        String[] f = line.split(",", -1);
        for (int i = 0; i < f.length; i++) {
            f[i] = f[i].strip();
        }
        return f;
    }

    private static boolean matches(String[] f, String[] header) {
        if (f.length != header.length) {
            return false;
        }
        for (int i = 0; i < f.length; i++) {
            if (!f[i].equalsIgnoreCase(header[i])) {
                return false;
            }
        }
        return true;
    }
}
