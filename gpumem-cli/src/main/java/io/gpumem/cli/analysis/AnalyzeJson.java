package io.gpumem.cli.analysis;

import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonGenerator;
import io.gpumem.trace.analysis.AnalysisPrinter;
import io.gpumem.trace.analysis.DeviceAnalysis;
import io.gpumem.trace.analysis.Diagnosis;
import io.gpumem.trace.analysis.PoolUsage;
import io.gpumem.trace.analysis.Recommendation;
import io.gpumem.trace.category.ByteCategory;
import io.gpumem.trace.category.CategoryBytes;
import io.gpumem.trace.category.CategoryRemedy;
import io.gpumem.trace.category.CategoryRule;
import io.gpumem.trace.category.PeakCategories;
import java.io.IOException;
import java.io.StringWriter;
import java.io.UncheckedIOException;
import java.util.List;
import java.util.Locale;
import java.util.Map;

/**
 * {@code gpumem analyze --json}: what the text prints, as one JSON object per device (an array of them when the
 * trace has several), written with jackson-core's streaming generator as every {@code --json} output is.
 *
 * <p>Keys: {@code device}, {@code state} (the analysed moment), {@code reserved} and {@code allocated} (of that
 * state), {@code peak_allocated} and {@code peak_entry}, {@code verdict} ({@code kind}, {@code headline},
 * {@code because}, {@code evidence}), {@code remedies} (ranked: {@code target}, {@code remedy}, {@code saves},
 * {@code model}, {@code pytorch_today}, {@code how}), {@code recommendations} ({@code action}, {@code saves},
 * {@code basis}), {@code live_at_peak} and {@code live_at_end} (exactly the six categories, bytes; the first sums to
 * {@code peak_allocated}), for an OOM {@code oom_entry} and {@code live_at_oom}, {@code rules_at_peak} (bytes per
 * rule) and {@code notes}.
 */
final class AnalyzeJson {
    private static final JsonFactory FACTORY = new JsonFactory();

    private AnalyzeJson() {}

    /** The document: one object for one device, an array for several. */
    static String of(List<DeviceAnalysis> analyses, List<PeakCategories> categories) {
        StringWriter w = new StringWriter();
        try (JsonGenerator g = FACTORY.createGenerator(w)) {
            boolean array = analyses.size() != 1;
            if (array) {
                g.writeStartArray();
            }
            for (int i = 0; i < analyses.size(); i++) {
                device(g, analyses.get(i), categories.get(i));
            }
            if (array) {
                g.writeEndArray();
            }
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
        return w.toString();
    }

    private static void device(JsonGenerator g, DeviceAnalysis a, PeakCategories p) throws IOException {
        g.writeStartObject();
        g.writeNumberField("device", a.device());
        g.writeStringField("state", a.analysis().state().label());
        PoolUsage all = a.analysis().all();
        g.writeNumberField("reserved", all.reserved());
        g.writeNumberField("allocated", all.allocated());
        g.writeNumberField("peak_allocated", p.peakAllocated());
        g.writeNumberField("peak_entry", p.peakEntry());
        Diagnosis d = a.analysis().diagnosis();
        g.writeObjectFieldStart("verdict");
        g.writeStringField("kind", d.kind().name().toLowerCase(Locale.ROOT));
        g.writeStringField("headline", AnalysisPrinter.headline(d.kind()));
        g.writeStringField("because", d.trigger());
        g.writeArrayFieldStart("evidence");
        for (String e : d.evidence()) {
            g.writeString(e);
        }
        g.writeEndArray();
        g.writeEndObject();
        g.writeArrayFieldStart("remedies");
        for (CategoryRemedy r : p.remedies()) {
            g.writeStartObject();
            g.writeStringField("target", r.target());
            g.writeStringField("remedy", r.remedy());
            g.writeNumberField("saves", r.saves());
            g.writeStringField("model", r.model());
            g.writeBooleanField("pytorch_today", r.pytorchToday());
            g.writeStringField("how", r.how());
            g.writeEndObject();
        }
        g.writeEndArray();
        g.writeArrayFieldStart("recommendations");
        for (Recommendation r : a.recommendations().recommendations()) {
            g.writeStartObject();
            g.writeStringField("action", r.action());
            g.writeNumberField("saves", r.bytesSaved());
            g.writeStringField("basis", r.basis());
            g.writeEndObject();
        }
        g.writeEndArray();
        split(g, "live_at_peak", p.atPeak());
        split(g, "live_at_end", p.atEnd());
        if (p.atFailure() != null) {
            g.writeNumberField("oom_entry", p.atFailure().entry());
            split(g, "live_at_oom", p.atFailure());
        }
        g.writeObjectFieldStart("rules_at_peak");
        for (Map.Entry<CategoryRule, Long> e : p.rulesAtPeak().entrySet()) {
            g.writeNumberField(e.getKey().name().toLowerCase(Locale.ROOT), e.getValue());
        }
        g.writeEndObject();
        g.writeArrayFieldStart("notes");
        for (String n : a.replayNotes()) {
            g.writeString(n);
        }
        for (String n : a.recommendations().notes()) {
            g.writeString(n);
        }
        for (String n : p.notes()) {
            g.writeString(n);
        }
        g.writeEndArray();
        g.writeEndObject();
    }

    private static void split(JsonGenerator g, String name, CategoryBytes bytes) throws IOException {
        g.writeObjectFieldStart(name);
        for (ByteCategory c : ByteCategory.values()) {
            g.writeNumberField(c.key(), bytes.get(c));
        }
        g.writeEndObject();
    }
}
