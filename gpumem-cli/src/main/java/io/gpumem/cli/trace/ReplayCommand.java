package io.gpumem.cli.trace;

import io.gpumem.cli.GpumemCommand;
import io.gpumem.cli.SizeConverter;
import io.gpumem.cli.options.AllocatorOptions;
import io.gpumem.cli.options.BadInputException;
import io.gpumem.cli.options.OutputFile;
import io.gpumem.cli.options.TraceFileOptions;
import io.gpumem.config.AllocatorConfig;
import io.gpumem.config.ConfigException;
import io.gpumem.engine.RunOutcome;
import io.gpumem.history.MemorySnapshot;
import io.gpumem.policy.PolicySpec;
import io.gpumem.size.ByteSize;
import io.gpumem.trace.io.AllocatorSnapshots;
import io.gpumem.trace.io.InconsistentSnapshotException;
import io.gpumem.trace.io.OutputFiles;
import io.gpumem.trace.io.PytorchSnapshotWriter;
import io.gpumem.trace.io.TraceFormatException;
import io.gpumem.trace.io.TraceSnapshot;
import io.gpumem.trace.replay.DeviceFidelity;
import io.gpumem.trace.replay.FidelityReport;
import io.gpumem.trace.replay.Mismatch;
import io.gpumem.trace.replay.OracleDevice;
import io.gpumem.trace.replay.OracleReplay;
import io.gpumem.trace.session.TraceSession;
import java.io.IOException;
import java.io.PrintWriter;
import java.io.UncheckedIOException;
import java.nio.file.Path;
import java.util.List;
import java.util.Locale;
import java.util.Objects;
import picocli.CommandLine.Command;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Option;

/**
 * {@code gpumem replay [--check] [--json] [--snapshot OUT] FILE}: replays a recorded trace through gpumem's
 * caching allocator in oracle mode (the device returns the recorded driver addresses) and reports how many
 * recorded decisions it reproduced. Exit status: 0 (with {@code --check}: the replay is identical to the
 * recording); 1 with {@code --check} when any placement, driver call or end-state segment differs (returned
 * here, the command's one verdict); 2 for unreadable or inconsistent input or a bad option, thrown as typed
 * exceptions and reported by {@code GpumemCli}. The file is read, and the busiest window rebuilt for
 * {@code --policy}, by a {@link TraceSession}.
 */
@Command(
        name = "replay",
        mixinStandardHelpOptions = true,
        description = {
            "Replay a recorded trace through gpumem's allocator in oracle mode (the device returns the"
                    + " recorded addresses) and report placement fidelity. Every device trace of the file is replayed."
        },
        exitCodeListHeading = "%nExit status:%n",
        exitCodeList = {
            "0:the replay ran (with --check: identical to the recording: every alloc at its address, every"
                    + " driver call, every end-state segment)",
            "1:with --check: a placement, a driver call or the end state differs from the recording",
            "2:bad input: unreadable, malformed or inconsistent file (see --lenient), bad option",
            "3:an internal error (a bug in gpumem)"
        })
public final class ReplayCommand extends GpumemCommand {

    @Mixin
    TraceFileOptions input;

    @Option(
            names = "--check",
            description = "Exit with status 1 unless every alloc is placed at its recorded address,"
                    + " every segment event is reproduced and the end state is the recorded one, segment by segment.")
    boolean check;

    @Option(
            names = "--json",
            description = "End with one JSON object on the last line: trace, allocs, exact,"
                    + " segment_events, segment_matched, first_mismatch (totals over devices).")
    boolean json;

    @Option(
            names = "--snapshot",
            paramLabel = "OUT",
            description = "Write the model's end state and history as a PyTorch snapshot pickle (opens in memory_viz),"
                    + " keeping everything the recording had: stack frames, time_us, oom entries, annotations. For a"
                    + " file of requests only (RMM log, lifetime CSV, ops script): the layout the caching allocator"
                    + " gives its requests, up to the first one that does not fit on --capacity.")
    Path snapshotOut;

    @Option(
            names = {"-c", "--config"},
            paramLabel = "CONF",
            description = "Replay under this allocator configuration instead of the recorded one (a what-if, e.g."
                    + " expandable_segments:True); --snapshot then writes the snapshot of that what-if.")
    String config;

    @Option(
            names = "--policy",
            paramLabel = "NAME[:OPTIONS]",
            description =
                    "With --snapshot: replay the busiest device's window under this allocation policy (as compare"
                            + " --policy does) and write that policy allocator's own snapshot (default: none, the oracle replay).")
    String policy;

    @Option(
            names = "--capacity",
            paramLabel = "SIZE",
            converter = SizeConverter.class,
            description = "Device memory assumed for sizing expandable-segment reservations (PyTorch reserves"
                    + " ceil(1.125 x memory / page) pages), e.g. 80GiB; default: 4,560 x 20 MiB / 1.125 (about 79.17"
                    + " GiB), the size the public expandable-segments trace implies. For --policy, and for --snapshot"
                    + " of a file of requests only: the device the window is replayed on; default: compare's, the"
                    + " recorded capacity.")
    Long capacityBytes;

    @Override
    public Integer call() {
        PrintWriter out = out();
        if (snapshotOut != null) {
            OutputFile.check("--snapshot", snapshotOut, input.file());
        }
        long gpuMemory = capacityBytes == null ? OracleDevice.DEFAULT_TOTAL_MEMORY : capacityBytes;
        AllocatorConfig whatIf = config == null ? null : AllocatorOptions.config(config);
        PolicySpec policySpec = null;
        if (policy != null) {
            policySpec = AllocatorOptions.policy(policy);
            if (snapshotOut == null || whatIf != null || check) {
                throw new BadInputException("--policy goes with --snapshot OUT only (not with --config or --check):"
                        + " it writes the snapshot of the window replayed under that policy");
            }
        }
        TraceSession session = input.open(err());
        TraceSnapshot trace = session.trace();
        if (policySpec != null) {
            writePolicySnapshot(session, policySpec, out);
            return 0;
        }
        if (!trace.addressesRecorded()) {
            return requestsOnly(session, whatIf, out);
        }
        OracleReplay replay = new OracleReplay(gpuMemory)
                .progress(TerminalProgress.forTerminal("replay", "entries"))
                .writeSnapshot(snapshotOut != null);
        FidelityReport report;
        try {
            report = whatIf == null ? replay.check(trace) : replay.check(trace, whatIf);
        } catch (ConfigException e) {
            throw new TraceFormatException(trace.source(), "", "recorded allocator settings: " + e.getMessage(), e);
        } catch (IllegalArgumentException | IllegalStateException e) {
            // The end state cannot be rebuilt into an allocator (blocks that do not tile their segment, sizes
            // that are not multiples of 512, ...): the file is inconsistent, not gpumem.
            throw new InconsistentSnapshotException(trace.source(), e);
        }
        print(out, report);
        if (snapshotOut != null && replay.replayedSnapshot() == null) {
            throw new BadInputException(trace.source() + ": " + report.notes().getFirst() + "; no snapshot written");
        }
        if (snapshotOut != null) {
            write(replay.replayedSnapshot(), snapshotOut);
            out.println("snapshot written to " + snapshotOut);
        }
        if (json) {
            out.println(json(report));
        }
        out.flush();
        // the one exit status besides 0 and 2: --check's "a placement, driver call or end-state segment differs"
        return check && !report.isExact() ? 1 : 0;
    }

    static void print(PrintWriter out, FidelityReport r) {
        out.println("trace " + r.trace() + ": " + r.entries() + " entries on "
                + r.devices().size() + " device trace(s)");
        for (DeviceFidelity d : r.devices()) {
            out.printf(
                    Locale.ROOT,
                    "device %d: %d/%d allocs exact (%s), %d/%d segment events matched, %d release"
                            + " run(s), end state %d/%d segments identical%n",
                    d.device(),
                    d.exact(),
                    d.allocs(),
                    percent(d.exact(), d.allocs()),
                    d.segmentMatched(),
                    d.segmentEvents(),
                    d.releaseRuns(),
                    d.endSegmentsSame(),
                    d.endSegments());
            for (String note : d.notes()) {
                out.println("  note: " + note);
            }
        }
        for (String note : r.notes()) {
            out.println("note: " + note);
        }
        out.printf(
                Locale.ROOT,
                "total: %d/%d allocs exact (%s), %d/%d segment events matched%n",
                r.exact(),
                r.allocs(),
                percent(r.exact(), r.allocs()),
                r.segmentMatched(),
                r.segmentEvents());
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
     * A file of requests only (an RMM log, a tensor-lifetime CSV, an ops script) has no recorded placement to check:
     * says so (refused under {@code --check}); with {@code --snapshot}, writes the layout the caching allocator gives
     * its requests instead, under the recorded configuration or {@code --config}, on a device of {@code --capacity}
     * (else the capacity compare replays it at), up to the first request that does not fit there.
     */
    private int requestsOnly(TraceSession session, AllocatorConfig whatIf, PrintWriter out) {
        TraceSnapshot trace = session.trace();
        String what = trace.format().withArticle()
                + ": it records requests but not the allocator's addresses, so placement cannot be checked";
        String why = trace.source() + " is " + what;
        if (check) {
            throw new BadInputException(why);
        }
        long devices = trace.deviceTraces().stream().filter(t -> !t.isEmpty()).count();
        out.println(
                "trace " + trace.source() + ": " + trace.entryCount() + " entries on " + devices + " device trace(s)");
        out.println("note: the file is " + what);
        if (snapshotOut != null && devices > 0) {
            int d = session.busiestDevice();
            AllocatorConfig config = whatIf != null ? whatIf : session.recordedConfig();
            long capacity = replayedOn(session, d);
            RunOutcome run = session.playKeepingState(d, config, capacity);
            MemorySnapshot end =
                    Objects.requireNonNull(run.allocator(), "a kept allocator").snapshot();
            write(AllocatorSnapshots.toTraceSnapshot(end, trace.source()), snapshotOut);
            out.println("device " + d + " replayed under " + config.inWords() + " on " + ByteSize.format(capacity)
                    + ": "
                    + end.segments().size() + " segments"
                    + (run.failedOp() >= 0
                            ? "; the request of entry #"
                                    + session.window(d).replay().playedStream().entry(run.failedOp())
                                    + " does not fit, and the snapshot is the state it failed in"
                            : "")
                    + "; snapshot written to " + snapshotOut);
        }
        if (json) {
            out.println(json(new FidelityReport(trace.source(), List.of(), List.of(why))));
        }
        out.flush();
        return 0;
    }

    /**
     * {@code --policy P --snapshot OUT}: the busiest device's window (rebuilt start, then its requests, as
     * {@code compare --policy} replays it) under policy P on a device of {@code --capacity}, else at the capacity
     * compare replays it at, written as P's own {@code snapshot()} through the snapshot writer.
     */
    private void writePolicySnapshot(TraceSession session, PolicySpec policySpec, PrintWriter out) {
        int d = session.busiestDevice();
        long capacity = replayedOn(session, d);
        MemorySnapshot end = session.policySnapshot(d, policySpec, capacity);
        if (end == null) {
            throw new BadInputException(session.source() + ": device " + d + "'s live blocks at the window's start do"
                    + " not fit in " + ByteSize.format(capacity) + " under policy " + policySpec.name()
                    + "; no snapshot written");
        }
        write(AllocatorSnapshots.toTraceSnapshot(end, session.source()), snapshotOut);
        out.println("device " + d + " of " + session.source() + " replayed under policy " + policy + " on "
                + ByteSize.format(capacity) + ": " + end.segments().size() + " segments; snapshot written to "
                + snapshotOut);
        out.flush();
    }

    /**
     * The device a what-if replay of {@code device}'s window runs on: {@code --capacity}, else compare's (the recorded
     * capacity), so that the snapshot written is the state of the run compare reports.
     */
    private long replayedOn(TraceSession session, int device) {
        return capacityBytes != null ? capacityBytes : session.recordedCapacity(device);
    }

    private static void write(TraceSnapshot snapshot, Path file) {
        try {
            new PytorchSnapshotWriter().write(snapshot, file);
        } catch (IOException e) {
            throw new UncheckedIOException("cannot write " + file + ": " + OutputFiles.reason(e), e);
        }
    }
}
