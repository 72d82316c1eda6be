package io.gpumem.cli.trace;

import io.gpumem.cli.SizeConverter;
import io.gpumem.config.AllocatorConfig;
import io.gpumem.config.ConfigException;
import io.gpumem.history.TraceAction;
import io.gpumem.history.TraceEntry;
import io.gpumem.policy.PolicyRegistry;
import io.gpumem.policy.PolicySpec;
import io.gpumem.size.ByteSize;
import io.gpumem.trace.io.TraceSnapshot;
import io.gpumem.trace.replay.WhatIfReplay;
import io.gpumem.trace.whatif.WhatIfOutcome;
import io.gpumem.trace.window.RecordedConfig;
import io.gpumem.trace.window.WindowStart;
import java.io.PrintWriter;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.Callable;
import picocli.CommandLine.Command;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.Spec;

/**
 * {@code gpumem compare FILE --config C ...}: replays one device's request stream from the window's rebuilt
 * start under the recorded configuration (always the first row) and each given one, on a simulated device, and
 * tabulates peak memory, driver calls, retries, OOMs at the recorded capacity and the minimum capacity. Each
 * {@code --policy} adds a row replayed under that allocation policy. The rows are computed by {@link CompareRuns}.
 */
@Command(name = "compare", mixinStandardHelpOptions = true,
        description = {"Answer \"what if\": replay a trace's requests under other allocator configurations"
                + " (PYTORCH_CUDA_ALLOC_CONF syntax) and compare peak memory, driver calls, retries, OOMs and the"
                + " minimum device capacity. The recorded configuration is always the first row."})
public final class CompareCommand implements Callable<Integer> {

    @Spec
    CommandSpec spec;

    @Mixin
    TraceInput input;

    @Option(names = {"-c", "--config"}, paramLabel = "CONF",
            description = "A configuration to compare, e.g. expandable_segments:True or max_split_size_mb:128 (repeatable).")
    List<String> configs = new ArrayList<>();

    @Option(names = "--policy", paramLabel = "NAME[:OPTIONS]",
            description = "An allocation policy to add as a row (repeatable): pytorch[:CONF] (the PyTorch-exact"
                    + " allocator), stitch (virtual-memory stitching), planned (plan from this trace, serve online).")
    List<String> policies = new ArrayList<>();

    @Option(names = "--trace-device", paramLabel = "N",
            description = "Device trace to replay (default: the one with the most alloc entries).")
    Integer device;

    @Option(names = "--capacity", paramLabel = "SIZE", converter = SizeConverter.class,
            description = "Device capacity for the OOM column, e.g. 80GiB (default: the recorded capacity: the trace's"
                    + " peak reserved, or reserved + free at a recorded oom).")
    Long capacityBytes;

    @Option(names = "--json", description = "Print a JSON array instead of the table: one object per configuration"
            + " with config, peak_allocated, peak_reserved, min_capacity, device_allocs, retries, ooms, policy,"
            + " device_maps, ns_per_pair.")
    boolean json;

    @Option(names = "--html", paramLabel = "FILE",
            description = "Also write the HTML report of this device (as gpumem report does), with these rows in its what-if table.")
    java.nio.file.Path html;

    @Override
    public Integer call() {
        PrintWriter out = spec.commandLine().getOut();
        PrintWriter err = spec.commandLine().getErr();
        TraceSnapshot trace = input.readOrReport("compare", err);
        if (trace == null) {
            return 2;
        }
        AllocatorConfig recordedConfig;
        List<AllocatorConfig> others = new ArrayList<>();
        try {
            recordedConfig = RecordedConfig.of(trace);
            for (String c : configs) {
                others.add(AllocatorConfig.parse(c));
            }
        } catch (ConfigException e) {
            err.println("gpumem compare: bad --config: " + e.getMessage());
            return 2;
        }
        List<PolicySpec> policySpecs;
        try {
            policySpecs = PolicySpec.parseAll(policies);
        } catch (IllegalArgumentException e) {
            err.println("gpumem compare: bad --policy: " + e.getMessage());
            return 2;
        }
        int d = device != null ? device : busiestDevice(trace);
        if (d < 0 || d >= Math.max(1, trace.deviceTraces().size()) || trace.traceOf(d).isEmpty()) {
            err.println("gpumem compare: " + trace.source() + ": device " + d + " has no trace to replay");
            return 2;
        }
        CompareRuns runs;
        try {
            List<AllocatorConfig> all = new ArrayList<>();
            all.add(recordedConfig);
            all.addAll(others);
            runs = CompareRuns.run(trace, d, recordedConfig, all, policySpecs, capacityBytes,
                    TerminalProgress.forTerminal("compare", "configurations"));
        } catch (IllegalArgumentException | IllegalStateException e) {
            err.println("gpumem compare: " + trace.source() + ": inconsistent snapshot: " + e.getMessage());
            return 2;
        }
        WindowStart start = runs.start();
        WhatIfReplay replay = runs.replay();
        long capacity = runs.capacity();
        List<WhatIfOutcome> rows = runs.rows();
        if (json) {
            out.println(json(rows));
        } else {
            out.println("trace " + trace.source() + ", device " + d + ": " + trace.traceOf(d).size() + " entries; start "
                    + ByteSize.format(start.allocatedBytes()) + " allocated in " + ByteSize.format(start.reservedBytes())
                    + " reserved; " + (trace.format() == io.gpumem.trace.io.SourceFormat.PYTORCH_SNAPSHOT
                            || trace.format() == io.gpumem.trace.io.SourceFormat.PYTORCH_SEGMENT_LIST
                            ? "recorded peak reserved " + ByteSize.format(replay.recorded().peakReserved())
                            : "requests only (" + trace.format() + ", no driver calls recorded)")
                    + "; capacity " + ByteSize.format(capacity));
            out.print(table(rows));
        }
        if (html != null) {
            // the report's table labels rows by configuration; the compare rows join it under compare's labels
            List<WhatIfOutcome> outcomes = runs.reportRows();
            var analysis = io.gpumem.trace.analysis.DeviceAnalysis.of(trace, d, null,
                    capacityBytes != null ? capacityBytes : io.gpumem.trace.analysis.MemoryState.UNKNOWN, 5, true);
            io.gpumem.cli.report.HtmlOutput.write(new io.gpumem.report.HtmlReport(trace.source())
                    .addDevice(trace, analysis, outcomes), html, json ? err : out);
        }
        out.flush();
        return 0;
    }

    static int busiestDevice(TraceSnapshot trace) {
        int best = 0;
        long most = -1;
        for (int d = 0; d < trace.deviceTraces().size(); d++) {
            long n = 0;
            for (TraceEntry e : trace.traceOf(d)) {
                if (e.action() == TraceAction.ALLOC) {
                    n++;
                }
            }
            if (n > most) {
                most = n;
                best = d;
            }
        }
        return best;
    }

    static String label(WhatIfOutcome r) {
        if (!PolicyRegistry.isExact(r.policy())) {
            return r.label() == null || r.label().isEmpty() ? r.policy() : r.policy() + ":" + r.label();
        }
        String c = r.label() == null || r.label().isEmpty() ? "defaults" : r.label();
        return r.recorded() ? "recorded (" + c + ")" : c;
    }

    static String table(List<WhatIfOutcome> rows) {
        String[] head = {"config", "peak allocated", "peak reserved", "reserved/allocated", "driver allocs",
                "driver frees", "retries", "OOMs", "min capacity", "map calls", "ns/pair"};
        List<String[]> cells = new ArrayList<>();
        cells.add(head);
        for (WhatIfOutcome r : rows) {
            cells.add(new String[] {label(r), ByteSize.format(r.peakAllocated()), ByteSize.format(r.peakReserved()),
                    String.format(Locale.ROOT, "%.3f", r.reservedPerAllocated()), Long.toString(r.deviceAllocs()),
                    Long.toString(r.deviceFrees()), Long.toString(r.retries()), Long.toString(r.ooms()),
                    ByteSize.format(r.minCapacity()), Long.toString(r.deviceMaps()),
                    String.format(Locale.ROOT, "%.0f", r.nsPerPair())});
        }
        int[] width = new int[head.length];
        for (String[] row : cells) {
            for (int i = 0; i < row.length; i++) {
                width[i] = Math.max(width[i], row[i].length());
            }
        }
        StringBuilder sb = new StringBuilder();
        for (String[] row : cells) {
            for (int i = 0; i < row.length; i++) {
                if (i == 0) {
                    sb.append(String.format(Locale.ROOT, "%-" + width[i] + "s", row[i]));
                } else {
                    sb.append("  ").append(String.format(Locale.ROOT, "%" + width[i] + "s", row[i]));
                }
            }
            sb.append('\n');
        }
        return sb.toString();
    }

    static String json(List<WhatIfOutcome> rows) {
        return Json.line(g -> {
            g.writeStartArray();
            for (WhatIfOutcome r : rows) {
                g.writeStartObject();
                g.writeStringField("config", r.label() == null ? "" : r.label());
                g.writeNumberField("peak_allocated", r.peakAllocated());
                g.writeNumberField("peak_reserved", r.peakReserved());
                g.writeNumberField("min_capacity", r.minCapacity());
                g.writeNumberField("device_allocs", r.deviceAllocs());
                g.writeNumberField("retries", r.retries());
                g.writeNumberField("ooms", r.ooms());
                g.writeStringField("policy", r.policy());
                g.writeNumberField("device_maps", r.deviceMaps());
                g.writeNumberField("ns_per_pair", r.nsPerPair());
                g.writeEndObject();
            }
            g.writeEndArray();
        });
    }
}
