package io.gpumem.trace.io;

import io.gpumem.history.FileKeys;
import io.gpumem.history.TraceAction;
import io.gpumem.history.TraceEntry;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;

/**
 * Reads an RMM {@code logging_resource_adaptor} CSV log ({@code Thread,Time,Action,Pointer,Size,Stream})
 * into a one-device {@link TraceSnapshot} without segments.
 *
 * <p>Mapping: {@code allocate} becomes an {@code alloc} entry; {@code free} becomes {@code free_requested}
 * followed by {@code free_completed} (RMM frees complete at once); {@code allocate failure} becomes an
 * {@code oom} entry. Pointers and streams may be decimal or {@code 0x} hex ({@code (nil)}: a null pointer). The
 * time column becomes the entry's {@code timeUs}: RMM's clock ({@code HH:MM:SS.ffffff}, microseconds after the
 * dot; also {@code h:m:s:us}) in microseconds since midnight, a plain number as it is, anything else the row number
 * (file order being the clock).
 * A free of a pointer that is not live, or with another size than its allocation's (RMM's {@code deallocate} takes
 * the size {@code allocate} was given), is an error naming the line. The pointers are RMM's decisions, not a
 * PyTorch caching allocator's, so the snapshot is marked {@code addressesRecorded = false}.
 */
public final class RmmLogReader {

    static final String[] HEADER = {"Thread", "Time", "Action", "Pointer", "Size", "Stream"};

    private final ReadLimits limits;

    public RmmLogReader() {
        this(ReadLimits.DEFAULT);
    }

    public RmmLogReader(ReadLimits limits) {
        this.limits = limits;
    }

    public TraceSnapshot read(Path file) {
        String name = file.toString();
        List<CsvLines.Row> rows = CsvLines.read(file, limits, HEADER);
        List<TraceEntry> out = new ArrayList<>(rows.size() * 2);
        // live pointers with their sizes: RMM's deallocate must be given the size allocate was
        Map<Long, Long> live = new HashMap<>();
        int n = 0;
        for (CsvLines.Row row : rows) {
            n++;
            String action = row.fields()[2].toLowerCase(Locale.ROOT);
            // RMM writes a null pointer (a failed allocation's) as printf's "(nil)"
            long ptr = row.fields()[3].strip().equals("(nil)") ? 0 : CsvLines.parseLong(name, row, 3, "Pointer", true);
            long size = CsvLines.parseLong(name, row, 4, "Size", true);
            long stream = CsvLines.parseLong(name, row, 5, "Stream", true);
            if (size < 0) {
                throw new TraceFormatException(name, "line " + row.line() + ", field Size", "negative size " + size);
            }
            long time = parseTime(row.fields()[1], n);
            switch (action) {
                case "allocate" -> {
                    if (ptr == 0) {
                        throw new TraceFormatException(
                                name, "line " + row.line() + ", field Pointer", "allocate with a null pointer");
                    }
                    if (live.putIfAbsent(ptr, size) != null) {
                        throw new TraceFormatException(
                                name,
                                "line " + row.line() + ", field Pointer",
                                "pointer 0x" + Long.toHexString(ptr) + " allocated twice without a free");
                    }
                    out.add(entry(TraceAction.ALLOC, ptr, size, stream, time));
                }
                case "free" -> {
                    Long allocated = live.remove(ptr);
                    if (allocated == null) {
                        throw new TraceFormatException(
                                name,
                                "line " + row.line() + ", field Pointer",
                                "free of pointer 0x" + Long.toHexString(ptr) + " that is not allocated");
                    }
                    if (allocated != size) {
                        throw new TraceFormatException(
                                name,
                                "line " + row.line() + ", field Size",
                                "free of pointer 0x" + Long.toHexString(ptr) + " with size " + size
                                        + ", allocated with size " + allocated);
                    }
                    out.add(entry(TraceAction.FREE_REQUESTED, ptr, size, stream, time));
                    out.add(entry(TraceAction.FREE_COMPLETED, ptr, size, stream, time));
                }
                case "allocate failure", "allocate_failure", "failure" ->
                    out.add(new TraceEntry(
                            TraceAction.OOM,
                            0,
                            size,
                            stream,
                            time,
                            List.of(),
                            0,
                            FileKeys.of(TraceEntry.SIZE | TraceEntry.STREAM | TraceEntry.TIME_US)));
                default ->
                    throw new TraceFormatException(
                            name,
                            "line " + row.line() + ", field Action",
                            "unknown action '" + CsvLines.abbreviate(row.fields()[2])
                                    + "' (expected allocate, free or allocate failure)");
            }
        }
        // RMM's pointers are its own memory resource's decisions, not PyTorch's: usable as a request stream only.
        return new TraceSnapshot(
                name, SourceFormat.RMM_LOG, List.of(), List.of(List.copyOf(out)), null, null, Map.of(), false);
    }

    private static TraceEntry entry(TraceAction a, long ptr, long size, long stream, long time) {
        return new TraceEntry(
                a,
                ptr,
                size,
                stream,
                time,
                List.of(),
                0,
                FileKeys.of(TraceEntry.ADDR | TraceEntry.SIZE | TraceEntry.STREAM | TraceEntry.TIME_US));
    }

    /**
     * RMM's clock strings become microseconds: {@code HH:MM:SS.ffffff} (its logger's pattern: the digits after the
     * dot are a fraction of a second) or {@code h:m:s:us}; numeric times are kept; anything else is the row number,
     * and so is a time that is negative, not finite or past 2^63 microseconds (it would have wrapped to a wrong one).
     */
    private static long parseTime(String s, long rowNumber) {
        try {
            long t = clockMicros(s, rowNumber);
            return t >= 0 ? t : rowNumber;
        } catch (NumberFormatException | ArithmeticException e) {
            return rowNumber;
        }
    }

    private static long clockMicros(String s, long rowNumber) {
        if (s.contains(":")) {
            String[] p = s.split(":", -1); // never empty, even for ":" alone
            String last = p[p.length - 1].strip();
            int dot = last.indexOf('.');
            if (p.length == 4 || dot < 0) { // h:m:s:us, or whole seconds
                long units = 0;
                for (int i = 0; i < p.length - 1; i++) {
                    units = sixty(units, p[i]);
                }
                return p.length == 4
                        ? Math.addExact(Math.multiplyExact(units, 1_000_000L), Long.parseLong(last))
                        : Math.multiplyExact(sixty(units, last), 1_000_000L);
            }
            long seconds = 0;
            for (int i = 0; i < p.length - 1; i++) {
                seconds = sixty(seconds, p[i]);
            }
            seconds = sixty(seconds, last.substring(0, dot));
            String fraction = last.substring(dot + 1);
            if (fraction.isEmpty() || fraction.length() > 9 || !fraction.chars().allMatch(Character::isDigit)) {
                return rowNumber;
            }
            long micros = Long.parseLong((fraction + "000000").substring(0, 6));
            return Math.addExact(Math.multiplyExact(seconds, 1_000_000L), micros);
        }
        double d = Double.parseDouble(s);
        if (!Double.isFinite(d) || d < 0 || d >= 0x1p63) {
            return rowNumber;
        }
        return Math.round(d);
    }

    /** {@code units * 60 + field}, where a field is a non-negative whole number. */
    private static long sixty(long units, String field) {
        long v = Long.parseLong(field.strip());
        if (v < 0) {
            throw new NumberFormatException("negative clock field " + field);
        }
        return Math.addExact(Math.multiplyExact(units, 60), v);
    }
}
