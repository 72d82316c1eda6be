package io.gpumem.report;

import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonGenerator;
import io.gpumem.alloc.Pool;
import io.gpumem.history.BlockInfo;
import io.gpumem.history.BlockState;
import io.gpumem.history.SegmentInfo;
import io.gpumem.history.TraceEntry;
import io.gpumem.trace.category.ByteCategories;
import io.gpumem.trace.category.ByteCategory;
import java.io.IOException;
import java.io.StringWriter;
import java.io.UncheckedIOException;
import java.util.List;

/**
 * The data the report's script draws from, one JSON object per device, embedded in the page as a
 * {@code <script type="application/json">} block (so no request is needed to load it).
 *
 * <p>Layout (kept compact: a 20,000-entry trace gives a few hundred KB): {@code sites} (all site labels),
 * {@code timeline} ({@code x} entry indexes, {@code alloc}, {@code res}, {@code top} site ids of the stack
 * columns, {@code stack} one row of column bytes per point, last column "other", {@code t} microseconds since
 * the first entry or absent), {@code cats} (absent when nothing was classified: {@code names} the six categories,
 * {@code stack} one row of bytes per category at each timeline point), {@code peak}, {@code oom} (entry index and request) and {@code maps}: per map its
 * title and segments as {@code [address hex, stream, pool (0 small, 1 large), expandable (0/1), blocks]}, a block
 * as {@code [size, state (0 allocated, 1 pending free, 2 free), requested, site, allocated at, freed at]}, and
 * {@code largest} {segment, block}. The characters that mean something to HTML are written as JSON escapes
 * ({@link #scriptSafe}) so that no string can close the script element or open a comment in it.
 */
final class ReportJson {
    /** Most points of a timeline. */
    static final int MAX_POINTS = 1200;
    /** Sites drawn as their own band; the rest are summed as "other". */
    static final int TOP_SITES = 9;

    private static final JsonFactory JSON = new JsonFactory();

    private ReportJson() {}

    static String of(DeviceReport r) {
        StringWriter w = new StringWriter();
        try (JsonGenerator g = JSON.createGenerator(w)) {
            write(g, r);
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
        return scriptSafe(w.toString());
    }

    /**
     * The JSON with {@code <}, {@code >}, {@code &}, U+2028 and U+2029 written as {@code \\uXXXX} escapes (they can
     * only stand inside its strings, where the escape means the same character): no name in the data (a frame, a
     * file, an annotation) can then end the script element or open a comment in it ({@code <!--<script>} made the
     * browser run the block on past its {@code </script>} and swallow the page's drawing script).
     */
    static String scriptSafe(String json) {
        StringBuilder out = null;
        for (int i = 0; i < json.length(); i++) {
            char c = json.charAt(i);
            if (c == '<' || c == '>' || c == '&' || c == '\u2028' || c == '\u2029') {
                if (out == null) {
                    out = new StringBuilder(json.length() + 64).append(json, 0, i);
                }
                out.append(String.format("\\u%04x", (int) c));
            } else if (out != null) {
                out.append(c);
            }
        }
        return out == null ? json : out.toString();
    }

    private static void write(JsonGenerator g, DeviceReport r) throws IOException {
        Timeline t = r.timeline();
        g.writeStartObject();
        g.writeNumberField("device", r.device());
        g.writeNumberField("entries", t.entries());
        g.writeArrayFieldStart("sites");
        for (String s : t.sites.labels()) {
            g.writeString(s);
        }
        g.writeEndArray();
        Timeline.Sampled s = t.sample(TOP_SITES);
        g.writeObjectFieldStart("timeline");
        g.writeNumberField("startAlloc", t.startAllocated);
        g.writeNumberField("startRes", t.startReserved);
        g.writeFieldName("x");
        g.writeArray(s.index(), 0, s.index().length);
        g.writeFieldName("alloc");
        g.writeArray(s.allocated(), 0, s.allocated().length);
        if (r.stateRecorded()) { // a file of requests only records no reserved bytes: no line
            g.writeFieldName("res");
            g.writeArray(s.reserved(), 0, s.reserved().length);
        }
        g.writeFieldName("top");
        g.writeArray(s.sites(), 0, s.sites().length);
        g.writeArrayFieldStart("stack");
        for (long[] row : s.stack()) {
            g.writeArray(row, 0, row.length);
        }
        g.writeEndArray();
        List<TraceEntry> trace = t.trace;
        if (!trace.isEmpty() && trace.getFirst().has(TraceEntry.TIME_US)) {
            long t0 = trace.getFirst().timeUs();
            g.writeArrayFieldStart("t");
            for (int i : s.index()) {
                g.writeNumber(trace.get(i).timeUs() - t0);
            }
            g.writeEndArray();
        }
        g.writeEndObject();
        ByteCategories categories = r.categories().categories();
        if (categories != null) {
            g.writeObjectFieldStart("cats");
            g.writeArrayFieldStart("names");
            for (ByteCategory c : ByteCategory.values()) {
                g.writeString(c.key());
            }
            g.writeEndArray();
            g.writeArrayFieldStart("stack");
            for (long[] row : categories.atEach(s.index())) {
                g.writeArray(row, 0, row.length);
            }
            g.writeEndArray();
            g.writeEndObject();
        }
        g.writeObjectFieldStart("peak");
        g.writeNumberField("index", t.peakIndex);
        g.writeNumberField("allocated", t.peakAllocated);
        g.writeNumberField("reserved", t.peakReserved);
        g.writeEndObject();
        var oom = r.analysis().analysis().state().oom();
        if (oom.isPresent()) {
            g.writeObjectFieldStart("oom");
            g.writeNumberField(
                    "index",
                    oom.get().entryIndex() >= 0
                            ? oom.get().entryIndex()
                            : r.analysis().end() - 1);
            g.writeNumberField("request", oom.get().requestBytes());
            g.writeEndObject();
        }
        g.writeArrayFieldStart("maps");
        for (SegmentMap m : r.maps()) {
            writeMap(g, m);
        }
        g.writeEndArray();
        g.writeEndObject();
    }

    private static void writeMap(JsonGenerator g, SegmentMap m) throws IOException {
        g.writeStartObject();
        g.writeStringField("title", m.title());
        g.writeArrayFieldStart("segs");
        List<SegmentInfo> segs = m.state().segments();
        for (int i = 0; i < segs.size(); i++) {
            SegmentInfo seg = segs.get(i);
            g.writeStartArray();
            g.writeString("0x" + Long.toHexString(seg.address()));
            g.writeNumber(seg.stream());
            g.writeNumber(seg.pool() == Pool.SMALL ? 0 : 1);
            g.writeNumber(seg.expandable() ? 1 : 0);
            g.writeStartArray();
            int[][] info = m.blockInfo().get(i);
            for (int b = 0; b < seg.blocks().size(); b++) {
                BlockInfo blk = seg.blocks().get(b);
                g.writeStartArray();
                g.writeNumber(blk.size());
                g.writeNumber(
                        blk.state() == BlockState.ACTIVE_ALLOCATED
                                ? 0
                                : blk.state() == BlockState.ACTIVE_PENDING_FREE ? 1 : 2);
                g.writeNumber(blk.state() == BlockState.INACTIVE ? 0 : blk.requestedSize());
                g.writeNumber(info[b][0]);
                g.writeNumber(info[b][1]);
                g.writeNumber(info[b][2]);
                g.writeEndArray();
            }
            g.writeEndArray();
            g.writeEndArray();
        }
        g.writeEndArray();
        g.writeFieldName("largest");
        g.writeArray(new int[] {m.largestSegment(), m.largestBlock()}, 0, 2);
        g.writeEndObject();
    }
}
