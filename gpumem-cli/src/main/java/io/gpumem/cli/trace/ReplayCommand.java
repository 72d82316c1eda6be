package io.gpumem.cli.trace;

import io.gpumem.cli.SizeConverter;
import io.gpumem.config.AllocatorConfig;
import io.gpumem.config.ConfigException;
import io.gpumem.policy.PolicySpec;
import io.gpumem.trace.io.AllocatorSnapshots;
import io.gpumem.trace.io.PytorchSnapshotWriter;
import io.gpumem.trace.replay.WhatIfReplay;
import io.gpumem.trace.window.RecordedConfig;
import io.gpumem.trace.window.WindowRebuilder;
import io.gpumem.trace.io.TraceSnapshot;
import io.gpumem.trace.replay.DeviceFidelity;
import io.gpumem.trace.replay.FidelityReport;
import io.gpumem.trace.replay.Mismatch;
import io.gpumem.trace.replay.OracleDevice;
import io.gpumem.trace.replay.OracleReplay;
import java.io.IOException;
import java.io.PrintWriter;
import java.nio.file.Path;
import java.util.Locale;
import java.util.concurrent.Callable;
import picocli.CommandLine.Command;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Option;
import picocli.CommandLine.Spec;
import picocli.CommandLine.Model.CommandSpec;

/**
 * {@code gpumem replay [--check] [--json] [--snapshot OUT] FILE}: replays a recorded trace through gpumem's
 * caching allocator in oracle mode (the device returns the recorded driver addresses) and reports how many
 * recorded decisions it reproduced. Exit status: 0 (with {@code --check}: the replay is identical to the
 * recording); 1 with {@code --check} when any placement, driver call or end-state segment differs; 2 for
 * unreadable or inconsistent input.
 */
@Command(name = "replay", mixinStandardHelpOptions = true,
        description = {"Replay a recorded trace through gpumem's allocator in oracle mode (the device returns the"
                + " recorded addresses) and report placement fidelity. Every device trace of the file is replayed."},
        exitCodeListHeading = "%nExit status:%n",
        exitCodeList = {"0:the replay ran (with --check: identical to the recording: every alloc at its address, every"
                + " driver call, every end-state segment)",
                "1:with --check: a placement, a driver call or the end state differs from the recording",
                "2:bad input: unreadable, malformed or inconsistent file (see --lenient), bad option"})
public final class ReplayCommand implements Callable<Integer> {

    @Spec
    CommandSpec spec;

    @Mixin
    TraceInput input;

    @Option(names = "--check", description = "Exit with status 1 unless every alloc is placed at its recorded address,"
            + " every segment event is reproduced and the end state is the recorded one, segment by segment.")
    boolean check;

    @Option(names = "--json", description = "End with one JSON object on the last line: trace, allocs, exact,"
            + " segment_events, segment_matched, first_mismatch (totals over devices).")
    boolean json;

    @Option(names = "--snapshot", paramLabel = "OUT",
            description = "Write the model's end state and history as a PyTorch snapshot pickle (opens in memory_viz),"
                    + " keeping everything the recording had: stack frames, time_us, oom entries, annotations.")
    Path snapshotOut;

    @Option(names = {"-c", "--config"}, paramLabel = "CONF",
            description = "Replay under this allocator configuration instead of the recorded one (a what-if, e.g."
                    + " expandable_segments:True); --snapshot then writes the snapshot of that what-if.")
    String config;

    @Option(names = "--policy", paramLabel = "NAME[:OPTIONS]",
            description = "With --snapshot: replay the busiest device's window under this allocation policy (as compare"
                    + " --policy does) and write that policy allocator's own snapshot (default: none, the oracle replay).")
    String policy;

    @Option(names = "--capacity", paramLabel = "SIZE", converter = SizeConverter.class,
            description = "Device memory assumed for sizing expandable-segment reservations (PyTorch reserves"
                    + " ceil(1.125 x memory / page) pages), e.g. 80GiB. Default: 4,560 x 20 MiB / 1.125 (about 79.17 GiB),"
                    + " the size the public expandable-segments trace implies.")
    Long capacityBytes;

    @Override
    public Integer call() {
        PrintWriter out = spec.commandLine().getOut();
        PrintWriter err = spec.commandLine().getErr();
        if (snapshotOut != null) {
            String problem = io.gpumem.cli.options.OutputFile.problem("--snapshot", snapshotOut, input.file);
            if (problem != null) {
                err.println("gpumem replay: " + problem);
                return 2;
            }
        }
        long gpuMemory = capacityBytes == null ? OracleDevice.DEFAULT_TOTAL_MEMORY : capacityBytes;
        AllocatorConfig whatIf;
        try {
            whatIf = config == null ? null : AllocatorConfig.parse(config);
        } catch (ConfigException e) {
            err.println("gpumem replay: bad --config: " + e.getMessage());
            return 2;
        }
        PolicySpec policySpec = null;
        if (policy != null) {
            try {
                policySpec = PolicySpec.parse(policy);
            } catch (IllegalArgumentException e) {
                err.println("gpumem replay: bad --policy: " + e.getMessage());
                return 2;
            }
            if (snapshotOut == null || whatIf != null || check) {
                err.println("gpumem replay: --policy goes with --snapshot OUT only (not with --config or --check):"
                        + " it writes the snapshot of the window replayed under that policy");
                return 2;
            }
        }
        TraceSnapshot trace = input.readOrReport("replay", err);
        if (trace == null) {
            return 2;
        }
        if (policySpec != null) {
            return writePolicySnapshot(trace, policySpec, gpuMemory, out, err);
        }
        OracleReplay replay = new OracleReplay(gpuMemory)
                .progress(TerminalProgress.forTerminal("replay", "entries"))
                .writeSnapshot(snapshotOut != null);
        FidelityReport report;
        try {
            report = whatIf == null ? replay.check(trace) : replay.check(trace, whatIf);
        } catch (ConfigException e) {
            err.println("gpumem replay: " + trace.source() + ": recorded allocator settings: " + e.getMessage());
            return 2;
        } catch (IllegalArgumentException | IllegalStateException e) {
            // The end state cannot be rebuilt into an allocator (blocks that do not tile their segment, sizes
            // that are not multiples of 512, ...): the file is inconsistent, not gpumem.
            err.println("gpumem replay: " + trace.source() + ": inconsistent snapshot: " + e.getMessage());
            return 2;
        }
        if (check && !trace.addressesRecorded()) {
            err.println("gpumem replay: " + trace.source() + ": " + report.notes().getFirst());
            return 2;
        }
        print(out, report);
        if (snapshotOut != null && replay.replayedSnapshot() == null) {
            err.println("gpumem replay: " + trace.source() + ": " + report.notes().getFirst() + "; no snapshot written");
            return 2;
        }
        if (snapshotOut != null) {
            try {
                new PytorchSnapshotWriter().write(replay.replayedSnapshot(), snapshotOut);
                out.println("snapshot written to " + snapshotOut);
            } catch (IOException e) {
                err.println("gpumem replay: cannot write " + snapshotOut + ": " + e.getMessage());
                return 2;
            }
        }
        if (json) {
            out.println(json(report));
        }
        out.flush();
        return check && !report.isExact() ? 1 : 0;
    }

    static void print(PrintWriter out, FidelityReport r) {
        out.println("trace " + r.trace() + ": " + r.entries() + " entries on " + r.devices().size() + " device trace(s)");
        for (DeviceFidelity d : r.devices()) {
            out.printf(Locale.ROOT, "device %d: %d/%d allocs exact (%s), %d/%d segment events matched, %d release"
                            + " run(s), end state %d/%d segments identical%n",
                    d.device(), d.exact(), d.allocs(), percent(d.exact(), d.allocs()), d.segmentMatched(),
                    d.segmentEvents(), d.releaseRuns(), d.endSegmentsSame(), d.endSegments());
            for (String note : d.notes()) {
                out.println("  note: " + note);
            }
        }
        for (String note : r.notes()) {
            out.println("note: " + note);
        }
        out.printf(Locale.ROOT, "total: %d/%d allocs exact (%s), %d/%d segment events matched%n", r.exact(), r.allocs(),
                percent(r.exact(), r.allocs()), r.segmentMatched(), r.segmentEvents());
        Mismatch m = r.firstMismatch();
        if (m == null) {
            out.println("first mismatch: none");
        } else {
            out.println("first mismatch: " + m);
            out.println("  context: " + m.context());
        }
    }

    private static String percent(long part, long whole) {
        return whole == 0 ? "n/a" : String.format(Locale.ROOT, "%.2f%%", 100.0 * part / whole);
    }

    static String json(FidelityReport r) {
        return Json.line(g -> {
            g.writeStartObject();
            g.writeStringField("trace", r.trace());
            g.writeNumberField("allocs", r.allocs());
            g.writeNumberField("exact", r.exact());
            g.writeNumberField("segment_events", r.segmentEvents());
            g.writeNumberField("segment_matched", r.segmentMatched());
            Mismatch m = r.firstMismatch();
            if (m == null) {
                g.writeNullField("first_mismatch");
            } else {
                g.writeObjectFieldStart("first_mismatch");
                g.writeNumberField("device", m.device());
                g.writeNumberField("entry", m.entry());
                g.writeStringField("kind", m.kind());
                g.writeStringField("expected", m.expected());
                g.writeStringField("got", m.got());
                g.writeStringField("context", m.context());
                g.writeEndObject();
            }
            g.writeEndObject();
        });
    }

    /**
     * {@code --policy P --snapshot OUT}: the busiest device's window (rebuilt start, then its requests, as
     * {@code compare --policy} replays it) under policy P on a device of {@code capacity}, written as P's own
     * {@code snapshot()} through the snapshot writer.
     */
    private int writePolicySnapshot(TraceSnapshot trace, PolicySpec policySpec, long capacity, PrintWriter out,
                                    PrintWriter err) {
        int d = CompareCommand.busiestDevice(trace);
        io.gpumem.history.MemorySnapshot end;
        try {
            var start = new WindowRebuilder(RecordedConfig.of(trace)).rebuild(trace, d);
            end = new WhatIfReplay(trace, d, start).policySnapshot(policySpec, capacity);
        } catch (IllegalArgumentException | IllegalStateException e) {
            err.println("gpumem replay: " + trace.source() + ": inconsistent snapshot: " + e.getMessage());
            return 2;
        }
        if (end == null) {
            err.println("gpumem replay: " + trace.source() + ": device " + d + "'s live blocks at the window's start do"
                    + " not fit in " + io.gpumem.size.ByteSize.format(capacity) + " under policy " + policySpec.name()
                    + "; no snapshot written");
            return 2;
        }
        try {
            new PytorchSnapshotWriter().write(AllocatorSnapshots.toTraceSnapshot(end, trace.source()), snapshotOut);
        } catch (IOException e) {
            err.println("gpumem replay: cannot write " + snapshotOut + ": " + e.getMessage());
            return 2;
        }
        out.println("device " + d + " of " + trace.source() + " replayed under policy " + policy + " on "
                + io.gpumem.size.ByteSize.format(capacity) + ": " + end.segments().size() + " segments; snapshot written to "
                + snapshotOut);
        out.flush();
        return 0;
    }
}
