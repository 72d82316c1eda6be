package io.gpumem.trace.io;

import io.gpumem.history.FileKeys;
import io.gpumem.history.TraceAction;
import io.gpumem.history.TraceEntry;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * Reads tensor lifetimes ({@code id,lower,upper,size}: a buffer of {@code size} bytes live over the
 * half-open logical interval [lower, upper), as in MindSpore SOMAS / idealloc / minimalloc files) into a
 * one-device request trace.
 *
 * <p>Each row becomes an {@code alloc} at {@code lower} and a {@code free_requested}/{@code free_completed}
 * pair at {@code upper}; events are ordered by time with <b>frees before allocs at equal times</b> (a
 * buffer ending at t makes room for one starting at t), then by row order. Rows with lower == upper are
 * never live and are dropped. The files carry no addresses: each buffer gets a synthetic, unique handle
 * (row number + 1, times 512), so the snapshot is marked {@code addressesRecorded = false}: it can be
 * replayed for what-if questions, not checked for placement. The logical time is kept in {@code timeUs}.
 */
public final class LifetimeCsvReader {

    static final String[] HEADER = {"id", "lower", "upper", "size"};

    private final ReadLimits limits;

    public LifetimeCsvReader() {
        this(ReadLimits.DEFAULT);
    }

    public LifetimeCsvReader(ReadLimits limits) {
        this.limits = limits;
    }

    public TraceSnapshot read(Path file) {
        String name = file.toString();
        List<CsvLines.Row> rows = CsvLines.read(file, limits, HEADER);
        int n = rows.size();
        long[] lower = new long[n];
        long[] upper = new long[n];
        long[] size = new long[n];
        HashMap<Long, Integer> idLines = new HashMap<>();
        for (int i = 0; i < n; i++) {
            CsvLines.Row row = rows.get(i);
            long id = CsvLines.parseLong(name, row, 0, "id", false);
            Integer first = idLines.putIfAbsent(id, row.line());
            if (first != null) {
                throw new TraceFormatException(
                        name,
                        "line " + row.line() + ", field id",
                        "id " + id + " appears twice (first on line " + first + ")");
            }
            lower[i] = CsvLines.parseLong(name, row, 1, "lower", false);
            upper[i] = CsvLines.parseLong(name, row, 2, "upper", false);
            size[i] = CsvLines.parseLong(name, row, 3, "size", false);
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
        }
        // Event keys: time, then kind (0 = free, 1 = alloc), then row; packed into a sortable long[] of indices.
        long[][] events = new long[2 * n][];
        int k = 0;
        for (int i = 0; i < n; i++) {
            if (lower[i] == upper[i]) {
                continue;
            }
            events[k++] = new long[] {lower[i], 1, i};
            events[k++] = new long[] {upper[i], 0, i};
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
                out.add(new TraceEntry(TraceAction.ALLOC, handle, size[i], 0, e[0], null, 0, keys));
            } else {
                out.add(new TraceEntry(TraceAction.FREE_REQUESTED, handle, size[i], 0, e[0], null, 0, keys));
                out.add(new TraceEntry(TraceAction.FREE_COMPLETED, handle, size[i], 0, e[0], null, 0, keys));
            }
        }
        return new TraceSnapshot(
                name, SourceFormat.LIFETIME_CSV, List.of(), List.of(List.copyOf(out)), null, null, Map.of(), false);
    }
}
