package io.gpumem.report;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.JsonToken;
import io.gpumem.engine.RunOutcome;
import io.gpumem.history.SegmentInfo;
import io.gpumem.history.TraceAction;
import io.gpumem.history.TraceEntry;
import io.gpumem.trace.analysis.AllocatorStates;
import io.gpumem.trace.analysis.DeviceAnalysis;
import io.gpumem.trace.analysis.OomEvent;
import io.gpumem.trace.analysis.Recommender;
import io.gpumem.trace.analysis.StateAnalysis;
import io.gpumem.trace.analysis.StateAnalyzer;
import io.gpumem.trace.io.AllocatorSnapshots;
import io.gpumem.trace.io.TraceSnapshot;
import io.gpumem.trace.session.TraceSession;
import io.gpumem.trace.workload.TrainingWorkload;
import io.gpumem.trace.workload.WorkloadWhatIf;
import java.io.IOException;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * The data the page's script draws from, parsed and held to what it must mean whatever the drawing: the timeline's
 * stacks add up to its allocated line, which never rises above reserved; the peak is the timeline's highest point;
 * the category stacks split the same bytes; the segment maps tile the analysed segments, name the largest free block
 * and give every allocated block a lifetime inside the trace; the OOM is the one analysed. Each test builds its page
 * (so a mutation tester credits it), from one shared run.
 */
class EmbeddedDataTest {

    static TraceSnapshot trace;
    static DeviceAnalysis result;
    static StateAnalysis analysis;
    static OomEvent oom;

    /** A small training job on three quarters of the memory it needs: an OOM partway through. */
    @BeforeAll
    static void runOutOfMemory() {
        TrainingWorkload w = TrainingWorkload.builder()
                .layers(3)
                .hidden(256)
                .heads(4)
                .vocab(4000)
                .batch(2)
                .seqLens(128, 1024, 128)
                .steps(4)
                .seed(9)
                .build();
        WorkloadWhatIf whatIf = new WorkloadWhatIf(w, w.peakLiveBytes() * 3 / 4, 0, true);
        RunOutcome run = whatIf.runWithHistory("");
        assertThat(run.completed()).isFalse();
        oom = new OomEvent(run.oomReport().roundedSize(), run.oomReport().deviceFree(), 0, -1);
        analysis = new StateAnalyzer().analyze(AllocatorStates.capture(run.allocator(), "", "at the oom", oom));
        Recommender.Result recs = new Recommender().recommend(analysis, whatIf);
        trace = AllocatorSnapshots.toTraceSnapshot(run.allocator().snapshot(), "oom");
        result = new DeviceAnalysis(0, trace.traceOf(0).size(), analysis, whatIf, recs, List.of());
    }

    /** The page's data for device 0, parsed into maps, lists, longs and strings. */
    @SuppressWarnings("unchecked")
    private static Map<String, Object> data() throws IOException {
        String page = new HtmlReport("oom")
                .addDevice(TraceSession.of(trace), result, List.of())
                .render();
        Matcher m = Pattern.compile(
                        "<script type=\"application/json\" class=\"report-data\" data-device=\"0\">(.*?)</script>",
                        Pattern.DOTALL)
                .matcher(page);
        assertThat(m.find()).isTrue();
        try (JsonParser p = new JsonFactory().createParser(m.group(1).replace("<\\/", "</"))) {
            p.nextToken();
            return (Map<String, Object>) value(p);
        }
    }

    private static Object value(JsonParser p) throws IOException {
        JsonToken t = p.currentToken();
        if (t == JsonToken.START_OBJECT) {
            Map<String, Object> o = new LinkedHashMap<>();
            while (p.nextToken() != JsonToken.END_OBJECT) {
                String name = p.currentName();
                p.nextToken();
                o.put(name, value(p));
            }
            return o;
        }
        if (t == JsonToken.START_ARRAY) {
            List<Object> a = new ArrayList<>();
            while (p.nextToken() != JsonToken.END_ARRAY) {
                a.add(value(p));
            }
            return a;
        }
        if (t == JsonToken.VALUE_NUMBER_INT) {
            return p.getLongValue();
        }
        return p.getValueAsString();
    }

    @SuppressWarnings("unchecked")
    private static Map<String, Object> obj(Object o) {
        return (Map<String, Object>) o;
    }

    @SuppressWarnings("unchecked")
    private static List<Object> list(Object o) {
        return (List<Object>) o;
    }

    private static long num(Object o) {
        return (Long) o;
    }

    private static long sum(Object row) {
        long s = 0;
        for (Object v : list(row)) {
            s += num(v);
        }
        return s;
    }

    @Test
    void theTimelinesStacksAddUpToItsAllocatedLineBelowReserved() throws IOException {
        Map<String, Object> d = data();
        int entries = trace.traceOf(0).size();
        assertThat(num(d.get("entries"))).isEqualTo(entries);
        Map<String, Object> t = obj(d.get("timeline"));
        List<Object> x = list(t.get("x"));
        List<Object> alloc = list(t.get("alloc"));
        List<Object> res = list(t.get("res"));
        List<Object> stack = list(t.get("stack"));
        assertThat(x).isNotEmpty().hasSizeLessThanOrEqualTo(ReportJson.MAX_POINTS);
        assertThat(alloc).hasSameSizeAs(x);
        assertThat(res).hasSameSizeAs(x);
        assertThat(stack).hasSameSizeAs(x);
        List<Object> top = list(t.get("top"));
        assertThat(top).hasSizeLessThanOrEqualTo(ReportJson.TOP_SITES);
        int sites = list(d.get("sites")).size();
        for (Object s : top) {
            assertThat(num(s)).isBetween(0L, (long) sites - 1);
        }
        long previous = -1;
        for (int i = 0; i < x.size(); i++) {
            long at = num(x.get(i));
            assertThat(at).as("point %d", i).isGreaterThan(previous).isLessThan(entries);
            previous = at;
            assertThat(list(stack.get(i))).as("the top sites and 'other'").hasSize(top.size() + 1);
            assertThat(sum(stack.get(i))).as("stack at point %d", i).isEqualTo(num(alloc.get(i)));
            assertThat(num(alloc.get(i))).isLessThanOrEqualTo(num(res.get(i)));
        }
        assertThat(t).containsKey("t"); // the allocator's history has times: microseconds from the first entry
        List<Object> times = list(t.get("t"));
        assertThat(times).hasSameSizeAs(x);
        assertThat(num(times.getFirst())).isGreaterThanOrEqualTo(0);
        List<TraceEntry> entriesOfTrace = trace.traceOf(0);
        long t0 = entriesOfTrace.getFirst().timeUs();
        for (int i = 0; i < x.size(); i++) {
            assertThat(num(times.get(i)))
                    .isEqualTo(entriesOfTrace.get((int) num(x.get(i))).timeUs() - t0);
        }
    }

    @Test
    void thePeakIsTheHighestAllocatedPointAndTheOomTheOneAnalysed() throws IOException {
        Map<String, Object> d = data();
        Map<String, Object> t = obj(d.get("timeline"));
        Map<String, Object> peak = obj(d.get("peak"));
        long highest = 0;
        for (Object a : list(t.get("alloc"))) {
            highest = Math.max(highest, num(a));
        }
        assertThat(num(peak.get("allocated"))).isGreaterThanOrEqualTo(highest).isPositive();
        assertThat(num(peak.get("reserved"))).isGreaterThanOrEqualTo(num(peak.get("allocated")));
        assertThat(num(peak.get("index"))).isBetween(0L, num(d.get("entries")) - 1);
        Map<String, Object> o = obj(d.get("oom"));
        assertThat(num(o.get("request"))).isEqualTo(oom.requestBytes());
        assertThat(num(o.get("index")))
                .as("no entry recorded: the last one analysed")
                .isEqualTo(result.end() - 1);
    }

    /**
     * The category stacks split exactly the bytes the timeline's line counts, at every point: both hold a block
     * until its {@code free_completed} entry (as {@code _memory_viz.py} counts), including at the points that fall
     * on a {@code free_requested} entry, where PyTorch's {@code allocated_bytes} has already dropped.
     */
    @Test
    void theCategoryStacksSplitTheTimelinesBytesAtEveryPoint() throws IOException {
        Map<String, Object> d = data();
        Map<String, Object> cats = obj(d.get("cats"));
        assertThat(list(cats.get("names")))
                .containsExactly("parameters", "gradients", "optimizer_state", "activations", "temporaries", "other");
        Map<String, Object> t = obj(d.get("timeline"));
        List<Object> alloc = list(t.get("alloc"));
        List<Object> x = list(t.get("x"));
        List<Object> stack = list(cats.get("stack"));
        assertThat(stack).hasSameSizeAs(alloc);
        int freeRequests = 0;
        for (int i = 0; i < stack.size(); i++) {
            assertThat(list(stack.get(i)))
                    .hasSize(6)
                    .allSatisfy(v -> assertThat(num(v)).isNotNegative());
            TraceEntry e = trace.traceOf(0).get((int) num(x.get(i)));
            freeRequests += e.action() == TraceAction.FREE_REQUESTED ? 1 : 0;
            assertThat(sum(stack.get(i))).as("point %d, %s", i, e).isEqualTo(num(alloc.get(i)));
        }
        assertThat(freeRequests).as("points on a free request were checked").isPositive();
    }

    @Test
    void theSegmentMapsTileTheAnalysedSegmentsAndNameTheLargestFreeBlock() throws IOException {
        Map<String, Object> d = data();
        List<Object> maps = list(d.get("maps"));
        assertThat(maps).isNotEmpty();
        Map<String, Object> oomMap = obj(maps.getFirst());
        List<SegmentInfo> segments = analysis.state().segments();
        List<Object> segs = list(oomMap.get("segs"));
        assertThat(segs).hasSameSizeAs(segments);
        long largestFree = -1;
        int[] largestAt = {-1, -1};
        long entries = num(d.get("entries"));
        for (int i = 0; i < segs.size(); i++) {
            List<Object> seg = list(segs.get(i));
            SegmentInfo s = segments.get(i);
            assertThat(seg.get(0)).isEqualTo("0x" + Long.toHexString(s.address()));
            assertThat(num(seg.get(1))).isEqualTo(s.stream());
            assertThat(num(seg.get(2))).isEqualTo(s.isSmall() ? 0 : 1);
            assertThat(num(seg.get(3))).isEqualTo(s.expandable() ? 1 : 0);
            List<Object> blocks = list(seg.get(4));
            assertThat(blocks).hasSameSizeAs(s.blocks());
            long total = 0;
            for (int b = 0; b < blocks.size(); b++) {
                List<Object> blk = list(blocks.get(b));
                long size = num(blk.get(0));
                long state = num(blk.get(1));
                total += size;
                assertThat(size).isEqualTo(s.blocks().get(b).size());
                if (state == 2) {
                    assertThat(num(blk.get(2)))
                            .as("a free block asks for nothing")
                            .isZero();
                    assertThat(num(blk.get(3))).as("and has no site").isEqualTo(-1);
                    if (size > largestFree) {
                        largestFree = size;
                        largestAt = new int[] {i, b};
                    }
                } else if (state == 0) {
                    assertThat(num(blk.get(2))).isBetween(1L, size);
                    long allocatedAt = num(blk.get(4));
                    assertThat(allocatedAt).as("allocated within the trace").isBetween(-1L, entries - 1);
                    assertThat(num(blk.get(5)))
                            .as("still live at the oom: never freed")
                            .isEqualTo(-1);
                }
            }
            assertThat(total).as("blocks tile the segment").isEqualTo(s.totalSize());
        }
        List<Object> largest = list(oomMap.get("largest"));
        if (largestFree < 0) {
            assertThat(largest).containsExactly(-1L, -1L);
        } else {
            assertThat(largest).containsExactly((long) largestAt[0], (long) largestAt[1]);
        }
        assertThat(largestFree).as("the oom left cached free blocks").isPositive();
    }

    /**
     * A name in the data (a frame, a file, an annotation) that holds {@code <!--<script>} made the browser run the data
     * block on past its {@code </script>} and draw nothing; every character HTML gives a meaning is now an escape
     * that JSON reads back as the same character.
     */
    @Test
    void namesThatMeanSomethingToHtmlAreEscapesThatParseBack() throws IOException {
        String name = "model.py:35 <!--<script>a && b > c\u2028</script>";
        String safe = ReportJson.scriptSafe("{\"sites\":[\"" + name + "\"]}"); // (no quote or backslash in it)
        assertThat(safe).doesNotContain("<", ">", "&", "\u2028");
        try (JsonParser p = new JsonFactory().createParser(safe)) {
            String read = null;
            while (p.nextToken() != null) {
                if (p.currentToken() == JsonToken.VALUE_STRING) {
                    read = p.getText();
                }
            }
            assertThat(read).isEqualTo(name);
        }
        assertThat(ReportJson.scriptSafe("{\"plain\":1}")).isEqualTo("{\"plain\":1}");
    }
}
