package io.gpumem.trace.io;

import io.gpumem.history.FileKeys;
import io.gpumem.history.TraceAction;
import io.gpumem.history.TraceEntry;
import io.gpumem.plan.LifetimeProblem;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * Reads tensor lifetimes ({@code id,lower,upper,size}: a buffer of {@code size} bytes live over the half-open logical
 * interval [lower, upper), as in MindSpore SOMAS / idealloc / minimalloc files; a MiniMalloc solution's
 * {@code id,lower,upper,size,offset} too, its offsets ignored) either as a planning problem ({@link #readProblem},
 * for {@code gpumem plan}) or as a one-device request trace ({@link #read}). Both come from one parse with one set
 * of rules: ids unique, times non-negative, {@code upper >= lower}, sizes positive; each refusal names the file, line
 * and field.
 *
 * <p>As a trace, each row becomes an {@code alloc} at {@code lower} and a {@code free_requested}/{@code free_completed}
 * pair at {@code upper}; events are ordered by time with <b>frees before allocs at equal times</b> (a buffer ending
 * at t makes room for one starting at t), then by row order. Rows with lower == upper are never live and are
 * dropped. The files carry no addresses: each buffer gets a synthetic, unique handle (row number + 1, times 512), so
 * the snapshot is marked {@code addressesRecorded = false}: it can be replayed for what-if questions, not checked for
 * placement. The logical time is kept in {@code timeUs}.
 */
public final class LifetimeCsvReader {

    static final String[] HEADER = {"id", "lower", "upper", "size"};
    /** The header of a planner's output (MiniMalloc's solution format), which this reader takes as its problem. */
    public static final String PLAN_COLUMNS = "id,lower,upper,size,offset";

    static final String[] PLAN_HEADER = PLAN_COLUMNS.split(",");

    private final ReadLimits limits;

    public LifetimeCsvReader() {
        this(ReadLimits.DEFAULT);
    }

    public LifetimeCsvReader(ReadLimits limits) {
        this.limits = limits;
    }

    /** The file's buffers as a planning problem, in row order, each placed at a multiple of {@code alignment}. */
    public LifetimeProblem readProblem(Path file, long alignment) {
        return parse(file, alignment);
    }

    /** The file's buffers as a one-device request trace. */
    public TraceSnapshot read(Path file) {
        LifetimeProblem p = parse(file, 1);
        int n = p.buffers();
        // Event keys: time, then kind (0 = free, 1 = alloc), then row; packed into a sortable long[] of indices.
        long[][] events = new long[2 * n][];
        int k = 0;
        for (int i = 0; i < n; i++) {
            if (p.lower(i) == p.upper(i)) {
                continue;
            }
            events[k++] = new long[] {p.lower(i), 1, i};
            events[k++] = new long[] {p.upper(i), 0, i};
        }
        long[][] sorted = Arrays.copyOf(events, k);
        Arrays.sort(sorted, (a, b) -> {
            int c = Long.compare(a[0], b[0]);
            if (c != 0) {
                return c;
            }
            c = Long.compare(a[1], b[1]);
            return c != 0 ? c : Long.compare(a[2], b[2]);
        });
        List<TraceEntry> out = new ArrayList<>(k * 3 / 2);
        FileKeys keys = FileKeys.of(TraceEntry.ADDR | TraceEntry.SIZE | TraceEntry.STREAM | TraceEntry.TIME_US);
        for (long[] e : sorted) {
            int i = (int) e[2];
            long handle = (i + 1L) * 512L;
            if (e[1] == 1) {
                out.add(new TraceEntry(TraceAction.ALLOC, handle, p.size(i), 0, e[0], null, 0, keys));
            } else {
                out.add(new TraceEntry(TraceAction.FREE_REQUESTED, handle, p.size(i), 0, e[0], null, 0, keys));
                out.add(new TraceEntry(TraceAction.FREE_COMPLETED, handle, p.size(i), 0, e[0], null, 0, keys));
            }
        }
        return new TraceSnapshot(
                file.toString(),
                SourceFormat.LIFETIME_CSV,
                List.of(),
                List.of(List.copyOf(out)),
                null,
                null,
                Map.of(),
                false);
    }

    /** The rows, checked, as a problem whose buffers are placed at multiples of {@code alignment}. */
    private LifetimeProblem parse(Path file, long alignment) {
        String name = file.toString();
        List<CsvLines.Row> rows = CsvLines.read(file, limits, HEADER, PLAN_HEADER);
        int n = rows.size();
        long[] id = new long[n];
        long[] lower = new long[n];
        long[] upper = new long[n];
        long[] size = new long[n];
        HashMap<Long, Integer> idLines = new HashMap<>();
        long total = 0; // placed bytes so far: the problem refuses a sum past 2^63; here the row is known
        for (int i = 0; i < n; i++) {
            CsvLines.Row row = rows.get(i);
            id[i] = CsvLines.parseLong(name, row, 0, "id", false);
            Integer first = idLines.putIfAbsent(id[i], row.line());
            if (first != null) {
                throw new TraceFormatException(
                        name,
                        "line " + row.line() + ", field id",
                        "id " + id[i] + " appears twice (first on line " + first + ")");
            }
            lower[i] = CsvLines.parseLong(name, row, 1, "lower", false);
            upper[i] = CsvLines.parseLong(name, row, 2, "upper", false);
            size[i] = CsvLines.parseLong(name, row, 3, "size", false);
            if (lower[i] < 0) {
                throw new TraceFormatException(
                        name, "line " + row.line() + ", field lower", "lower " + lower[i] + " is before time 0");
            }
            if (upper[i] < lower[i]) {
                throw new TraceFormatException(
                        name,
                        "line " + row.line() + ", field upper",
                        "upper " + upper[i] + " is below lower " + lower[i]);
            }
            if (size[i] <= 0) {
                throw new TraceFormatException(
                        name, "line " + row.line() + ", field size", "size must be positive, got " + size[i]);
            }
            if (size[i] >= LifetimeProblem.MAX_SIZE) {
                throw new TraceFormatException(
                        name,
                        "line " + row.line() + ", field size",
                        "size " + size[i] + " is 2^60 bytes (1 EiB) or more, which no device holds");
            }
            total += LifetimeProblem.placed(
                    lower[i], upper[i], size[i], alignment); // each at most 2^62: only the sum wraps
            if (total < 0) {
                throw new TraceFormatException(
                        name,
                        "line " + row.line() + ", field size",
                        "the sizes up to this row, each aligned to " + alignment
                                + " bytes, add up to 2^63 bytes or more, past any offset a plan can give");
            }
        }
        try {
            return new LifetimeProblem(id, lower, upper, size, alignment);
        } catch (IllegalArgumentException e) { // the sizes, aligned, add up past any offset
            throw new TraceFormatException(name, "", e.getMessage(), e);
        }
    }
}
