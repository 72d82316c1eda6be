package io.gpumem.trace.category;

import io.gpumem.alloc.AddressTable;
import io.gpumem.alloc.SizeRules;
import io.gpumem.config.AllocatorConfig;
import io.gpumem.engine.RequestStream;
import io.gpumem.history.TraceAction;
import io.gpumem.history.TraceEntry;
import io.gpumem.trace.align.FrameSignatures;
import io.gpumem.trace.align.RequestSequence;
import io.gpumem.trace.align.StepStructure;
import io.gpumem.trace.io.EntryFields;
import io.gpumem.trace.io.TraceSnapshot;
import io.gpumem.trace.replay.WhatIfReplay;
import io.gpumem.trace.window.RecordedConfig;
import io.gpumem.trace.window.WindowRebuilder;
import io.gpumem.trace.window.WindowStart;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.EnumMap;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.jspecify.annotations.Nullable;

/**
 * What the allocated bytes of one device's trace window are for: every block (live at the window's start, or
 * allocated inside it) gets one {@link ByteCategory} and the {@link CategoryRule} that gave it, so that the bytes
 * live at any moment (the peak, the end, a failing request) split into parameters, gradients, optimizer state,
 * activations, temporaries and other. Built from the recording alone, without the autograd graph.
 *
 * <h2>Algorithm</h2>
 * <ol>
 *   <li><b>Blocks.</b> The window start ({@link WindowRebuilder}) gives the blocks live before recording began
 *       (no frames, no allocation time; their block size counts); the requests ({@link RequestSequence}) give the
 *       rest, each counting its {@code round_size} from its alloc entry until its free completes (its
 *       {@code free_completed} entry where the trace records completions: a block freed while another stream
 *       still uses it holds its bytes until then, as the report's timeline, {@code _memory_viz.py} and a replay
 *       count them; PyTorch's {@code allocated_bytes} drops at the request). The rules below read when the
 *       program let go of it, its {@code free_requested} entry.</li>
 *   <li><b>Phases.</b> Each request's stack names a {@link Phase} (forward, backward, optimizer) or none. Runs of
 *       requests of one phase, ignoring requests without one, are the <em>phase runs</em>; run {@code k} lasts from
 *       its first request's alloc entry to the next run's, so every entry after the first phased request lies in
 *       exactly one run, and a free is "in" the run holding its entry.</li>
 *   <li><b>Lifetime rules</b> (request in run {@code a}, freed in run {@code b}, or live at the end):
 *       freed with {@code b == a}: temporaries; forward, freed in the first backward run after {@code a}:
 *       activations (sure when the free lies in the allocating step of the {@link StepStructure}); forward,
 *       never freed, with an OOM after it and no optimizer step between: activations too (the OOM cut the step
 *       short before its backward freed them; a lifetime cut short is a weaker reading); backward,
 *       live after {@code a}: gradients; optimizer, live after {@code a}: optimizer state.</li>
 *   <li><b>Parameters.</b> A block allocated outside every phase (before the window, or by setup code) and never
 *       freed in the window is a parameter when a gradient of its rounded size is left to match it: each step's
 *       backward allocates one gradient per parameter tensor, so per size the matches are capped by the most
 *       gradients of that size any one step allocates; candidates are taken in allocation order (start blocks
 *       first). What remains (optimizer state created before the window, data, buffers) is {@code other}.</li>
 *   <li><b>Without a phase</b> a request freed before the next request is a temporary (low confidence: the
 *       lifetime alone says it); any other block is {@code other}, with the rule saying why (no frames, frames
 *       naming no phase, a lifetime that fits no rule).</li>
 * </ol>
 *
 * <h2>Invariants</h2>
 * Every block has exactly one category, so at every moment the six categories sum to the allocated bytes
 * exactly: {@link #at}{@code (e).total()} is the start's allocated bytes plus the bytes of the blocks allocated
 * at or before {@code e} minus those whose free completed at or before it, and {@link #atPeak()} sums to
 * {@link #peakAllocated()}.
 * A free naming no known block (possible only in a damaged trace) changes nothing. Immutable after construction.
 */
public final class ByteCategories {

    private final StepStructure steps;
    private final List<CategorizedBlock> blocks;
    private final int entryCount;
    private final long peakAllocated;
    private final int peakEntry;
    private final boolean framed;

    private ByteCategories(
            StepStructure steps,
            List<CategorizedBlock> blocks,
            int entryCount,
            long peakAllocated,
            int peakEntry,
            boolean framed) {
        this.steps = steps;
        this.blocks = blocks;
        this.entryCount = entryCount;
        this.peakAllocated = peakAllocated;
        this.peakEntry = peakEntry;
        this.framed = framed;
    }

    /**
     * Classifies every block of {@code device}'s window.
     *
     * @throws IllegalArgumentException when the device has no alloc entry (a state-only snapshot, an empty trace)
     */
    public static ByteCategories of(TraceSnapshot trace, int device) {
        AllocatorConfig config = RecordedConfig.of(trace);
        WindowStart start = new WindowRebuilder(config).rebuild(trace, device);
        return of(trace, device, config, start, new WhatIfReplay(trace, device, start).stream());
    }

    /**
     * As {@link #of(TraceSnapshot, int)}, over a window already rebuilt under the recorded configuration
     * {@code config} and compiled (a session's), so that nothing is rebuilt twice.
     */
    public static ByteCategories of(
            TraceSnapshot trace, int device, AllocatorConfig config, WindowStart start, RequestStream requests) {
        RequestSequence seq = RequestSequence.of(trace, device, start, requests, new FrameSignatures());
        StepStructure steps = StepStructure.of(seq);
        return new Classifier(seq, steps, start, trace.traceOf(device), config).classify();
    }

    /** The step structure the rules used (shared with alignment and prediction). */
    public StepStructure steps() {
        return steps;
    }

    /** Every block of the window: start blocks first (address order), then requests in trace order. */
    public List<CategorizedBlock> blocks() {
        return blocks;
    }

    /** Whether any request carries stack frames; without them only lifetimes and sizes classify. */
    public boolean framed() {
        return framed;
    }

    /**
     * Peak allocated bytes of the window (requests at {@code round_size}, start blocks at their size, each until its
     * free completes).
     */
    public long peakAllocated() {
        return peakAllocated;
    }

    /** The entry at which allocated bytes first reach the peak; −1 when the window's start is the peak. */
    public int peakEntry() {
        return peakEntry;
    }

    /** The categories of the bytes live at peak allocated; they sum to {@link #peakAllocated()}. */
    public CategoryBytes atPeak() {
        return at(peakEntry);
    }

    /** The categories of the bytes live at the window's end (the state the snapshot ends in). */
    public CategoryBytes atEnd() {
        return at(entryCount - 1);
    }

    /**
     * The categories of the bytes live just after trace entry {@code entry} (−1: at the window's start).
     *
     * @throws IndexOutOfBoundsException when {@code entry} is not −1 or an entry of the trace
     */
    public CategoryBytes at(int entry) {
        if (entry < -1 || entry >= Math.max(entryCount, 0)) {
            throw new IndexOutOfBoundsException("entry " + entry + " of a trace of " + entryCount + " entries");
        }
        long[] bytes = new long[ByteCategory.values().length];
        for (CategorizedBlock b : blocks) {
            if (b.liveAt(entry)) {
                bytes[b.category().ordinal()] += b.bytes();
            }
        }
        return CategoryBytes.of(entry, bytes);
    }

    /**
     * The categories just after each of {@code entries} (ascending, each −1 or an entry of the trace) in one sweep
     * over the blocks' allocs and frees: what a timeline by category draws. Row {@code i} holds the bytes per
     * {@link ByteCategory} ordinal at {@code entries[i]}; each row sums to {@link #at}{@code (entries[i]).total()}.
     *
     * @throws IllegalArgumentException when {@code entries} is not ascending or names no entry of the trace
     */
    public long[][] atEach(int[] entries) {
        int previous = -1;
        for (int entry : entries) {
            if (entry < previous || entry >= Math.max(entryCount, 0)) {
                throw new IllegalArgumentException(
                        "entries must ascend within −1.." + (entryCount - 1) + ", got " + entry + " after " + previous);
            }
            previous = entry;
        }
        // Each block's alloc and free counts from the first row at or after its entry: a change per row and category,
        // found by a binary search over the rows (a few thousand), then summed row by row. Sorting the events instead
        // (1.5 M frees on a 276 MB snapshot) was most of writing that snapshot's report page.
        long[][] out = new long[entries.length][ByteCategory.values().length];
        long[] live = new long[ByteCategory.values().length];
        for (CategorizedBlock b : blocks) {
            int c = b.category().ordinal();
            if (b.allocEntry() < 0) {
                live[c] += b.bytes();
            } else {
                int row = firstRowFrom(entries, b.allocEntry());
                if (row < entries.length) {
                    out[row][c] += b.bytes();
                }
            }
            if (b.releaseEntry() >= 0) {
                int row = firstRowFrom(entries, b.releaseEntry());
                if (row < entries.length) {
                    out[row][c] -= b.bytes();
                }
            }
        }
        for (long[] row : out) {
            for (int c = 0; c < row.length; c++) {
                live[c] += row[c];
                row[c] = live[c];
            }
        }
        return out;
    }

    /** The first index of the ascending {@code entries} whose entry is at least {@code entry}; length if none. */
    private static int firstRowFrom(int[] entries, int entry) {
        int lo = 0;
        int hi = entries.length;
        while (lo < hi) {
            int mid = (lo + hi) >>> 1;
            if (entries[mid] < entry) {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        return lo;
    }

    /** Bytes per rule of the blocks live just after {@code entry}: how the split at that moment was reached. */
    public Map<CategoryRule, Long> rulesAt(int entry) {
        Map<CategoryRule, Long> out = new EnumMap<>(CategoryRule.class);
        for (CategorizedBlock b : blocks) {
            if (b.liveAt(entry)) {
                out.merge(b.rule(), b.bytes(), Long::sum);
            }
        }
        return out;
    }

    /** The classification pass; one use. */
    private static final class Classifier {
        private final RequestSequence seq;
        private final StepStructure steps;
        private final WindowStart start;
        private final List<TraceEntry> entries;
        /** The entries' columns (no record built per entry). */
        private final EntryFields fields;

        private final AllocatorConfig config;
        private final Phase[] phase;
        /** The last {@code oom} entry of the trace, −1 when there is none. */
        private final int lastOom;
        /**
         * Per {@code free_requested} entry, the {@code free_completed} entry that finishes it (−1: not by the window's
         * end); null when the trace records no completions, so that its frees take effect at their request.
         */
        private final int @Nullable [] completionOf;

        private int[] runStart = new int[16];
        private Phase[] runPhase = new Phase[16];
        private int runs;

        Classifier(
                RequestSequence seq,
                StepStructure steps,
                WindowStart start,
                List<TraceEntry> entries,
                AllocatorConfig config) {
            this.seq = seq;
            this.steps = steps;
            this.start = start;
            this.entries = entries;
            this.config = config;
            this.phase = new Phase[seq.size()];
            int oom = -1;
            boolean completions = false;
            this.fields = EntryFields.of(entries);
            for (int i = 0; i < entries.size(); i++) {
                TraceAction a = fields.action(i);
                oom = a == TraceAction.OOM ? i : oom;
                completions |= a == TraceAction.FREE_COMPLETED;
            }
            this.lastOom = oom;
            this.completionOf = completions ? completions() : null;
        }

        /** Pairs each {@code free_completed} with the latest pending {@code free_requested} of its address. */
        private int[] completions() {
            int[] out = new int[entries.size()];
            Arrays.fill(out, -1);
            AddressTable<Void> pending = AddressTable.forInts();
            for (int i = 0; i < entries.size(); i++) {
                TraceAction a = fields.action(i);
                long addr = fields.addr(i);
                if (addr == 0) {
                    continue; // not a key; a free of address 0 (a damaged trace) takes effect at its request
                }
                if (a == TraceAction.FREE_REQUESTED) {
                    pending.putInt(addr, i, -1);
                } else if (a == TraceAction.FREE_COMPLETED) {
                    int requested = pending.removeInt(addr, -1);
                    if (requested >= 0) {
                        out[requested] = i;
                    }
                }
            }
            return out;
        }

        /** The entry at which a block freed at {@code freeEntry} stops holding its bytes (see {@link CategorizedBlock}). */
        private int releaseOf(int freeEntry) {
            if (freeEntry < 0
                    || completionOf == null
                    || fields.action(freeEntry) != TraceAction.FREE_REQUESTED
                    || fields.addr(freeEntry) == 0) {
                return freeEntry;
            }
            return completionOf[freeEntry];
        }

        ByteCategories classify() {
            phases();
            List<CategorizedBlock> out = new ArrayList<>();
            startBlocks(out);
            int firstRequest = out.size();
            Map<Long, Integer> gradientsPerSize = new HashMap<>();
            Map<Long, Integer> gradientsThisStep = new HashMap<>();
            int gradientStep = -1;
            for (int r = 0; r < seq.size(); r++) {
                CategoryRule rule = ruleOf(r);
                int step = steps.stepOf(r);
                if (rule == CategoryRule.OUTLIVES_BACKWARD) {
                    if (step != gradientStep) {
                        gradientsThisStep.clear();
                        gradientStep = step;
                    }
                    int n = gradientsThisStep.merge(seq.roundedSizeOf(r), 1, Integer::sum);
                    gradientsPerSize.merge(seq.roundedSizeOf(r), n, Math::max);
                }
                out.add(new CategorizedBlock(
                        r,
                        fields.addr(seq.allocEntryOf(r)),
                        seq.roundedSizeOf(r),
                        seq.allocEntryOf(r),
                        seq.freeEntryOf(r),
                        releaseOf(seq.freeEntryOf(r)),
                        step,
                        rule));
            }
            matchParameters(out, firstRequest, gradientsPerSize);
            long level = start.allocatedBytes();
            long[] delta = new long[entries.size() + 1];
            for (CategorizedBlock b : out) {
                if (b.allocEntry() >= 0) {
                    delta[b.allocEntry()] += b.bytes();
                }
                if (b.releaseEntry() >= 0) {
                    delta[b.releaseEntry()] -= b.bytes();
                }
            }
            long peak = level;
            int peakEntry = -1;
            for (int i = 0; i < entries.size(); i++) {
                level += delta[i];
                if (level > peak) {
                    peak = level;
                    peakEntry = i;
                }
            }
            return new ByteCategories(
                    steps, Collections.unmodifiableList(out), entries.size(), peak, peakEntry, seq.framed());
        }

        /** Phase per request and the phase runs (see the class comment). */
        private void phases() {
            FrameSignatures signatures = seq.signatures();
            // per site id (a small dense int): its phase, found once; a boxed map and a capturing lambda per request
            // cost more than the walk
            Phase[] bySite = new Phase[signatures.count()];
            for (int r = 0; r < seq.size(); r++) {
                int site = seq.siteOf(r);
                Phase p = Phase.UNKNOWN;
                if (site >= 0) {
                    p = bySite[site];
                    if (p == null) {
                        p = Phase.of(signatures.frames(site));
                        bySite[site] = p;
                    }
                }
                phase[r] = p;
                if (p != Phase.UNKNOWN && (runs == 0 || runPhase[runs - 1] != p)) {
                    if (runs == runStart.length) {
                        runStart = Arrays.copyOf(runStart, runs * 2);
                        runPhase = Arrays.copyOf(runPhase, runs * 2);
                    }
                    runStart[runs] = seq.allocEntryOf(r);
                    runPhase[runs++] = p;
                }
            }
        }

        /** The phase run holding trace entry {@code entry}, −1 before the first phased request. */
        private int runOf(int entry) {
            int pos = Arrays.binarySearch(runStart, 0, runs, entry);
            return pos >= 0 ? pos : -pos - 2;
        }

        /** The step of the last request at or before trace entry {@code entry}. */
        private int stepAtEntry(int entry) {
            int lo = 0;
            int hi = seq.size() - 1;
            while (lo < hi) {
                int mid = (lo + hi + 1) >>> 1;
                if (seq.allocEntryOf(mid) <= entry) {
                    lo = mid;
                } else {
                    hi = mid - 1;
                }
            }
            return steps.stepOf(lo);
        }

        private CategoryRule ruleOf(int r) {
            int free = seq.freeEntryOf(r);
            Phase p = phase[r];
            if (p == Phase.UNKNOWN) {
                if (free >= 0 && (r + 1 == seq.size() || seq.allocEntryOf(r + 1) > free)) {
                    return CategoryRule.FREED_BEFORE_NEXT_REQUEST;
                }
                return seq.siteOf(r) < 0 ? CategoryRule.NO_FRAMES : CategoryRule.NO_PHASE;
            }
            int a = runOf(seq.allocEntryOf(r));
            int b = free < 0 ? -1 : runOf(free);
            if (free >= 0 && b == a) {
                return CategoryRule.FREED_IN_ITS_PHASE;
            }
            return switch (p) {
                case FORWARD -> {
                    if (free >= 0 && runPhase[b] == Phase.BACKWARD && noBackwardBetween(a, b)) {
                        yield stepAtEntry(free) == steps.stepOf(r)
                                ? CategoryRule.SAVED_FOR_BACKWARD
                                : CategoryRule.SAVED_ACROSS_STEPS;
                    }
                    if (free < 0 && cutShortByOom(a, seq.allocEntryOf(r))) {
                        yield CategoryRule.CUT_SHORT_BY_OOM;
                    }
                    yield CategoryRule.NO_LIFETIME_RULE;
                }
                case BACKWARD -> CategoryRule.OUTLIVES_BACKWARD;
                case OPTIMIZER -> CategoryRule.OUTLIVES_OPTIMIZER_STEP;
                case UNKNOWN -> throw new AssertionError("handled above");
            };
        }

        /**
         * Whether an OOM entry after {@code allocEntry} cut the step short: no optimizer run lies between run
         * {@code a} and the last OOM, so the forward tensor, never freed, was waiting for its backward.
         */
        private boolean cutShortByOom(int a, int allocEntry) {
            if (lastOom < allocEntry) {
                return false;
            }
            for (int k = a + 1; k <= runOf(lastOom); k++) {
                if (runPhase[k] == Phase.OPTIMIZER) {
                    return false;
                }
            }
            return true;
        }

        private boolean noBackwardBetween(int a, int b) {
            for (int k = a + 1; k < b; k++) {
                if (runPhase[k] == Phase.BACKWARD) {
                    return false;
                }
            }
            return true;
        }

        /** The blocks live at the window's start, with the entry that frees each inside the window (or −1). */
        private void startBlocks(List<CategorizedBlock> out) {
            Map<Long, Integer> liveStart = new HashMap<>();
            RequestStream.forEachLiveBlock(start.segments(), (seg, blk) -> {
                liveStart.put(blk.address(), out.size());
                out.add(new CategorizedBlock(
                        -1, blk.address(), blk.size(), -1, -1, -1, -1, CategoryRule.BEFORE_THE_WINDOW));
            });
            if (liveStart.isEmpty()) {
                return;
            }
            boolean anyFreeRequested = false;
            for (int i = 0; i < entries.size() && !anyFreeRequested; i++) {
                anyFreeRequested = fields.action(i) == TraceAction.FREE_REQUESTED;
            }
            TraceAction freeAction = anyFreeRequested ? TraceAction.FREE_REQUESTED : TraceAction.FREE_COMPLETED;
            // A start block is freed by the first free of its address before any alloc reuses that address.
            for (int i = 0; i < entries.size() && !liveStart.isEmpty(); i++) {
                TraceAction a = fields.action(i);
                if (a == TraceAction.ALLOC) {
                    liveStart.remove(fields.addr(i));
                } else if (a == freeAction) {
                    Integer k = liveStart.remove(fields.addr(i));
                    if (k != null) {
                        CategorizedBlock b = out.get(k);
                        out.set(k, new CategorizedBlock(-1, b.address(), b.bytes(), -1, i, releaseOf(i), -1, b.rule()));
                    }
                }
            }
        }

        /** Gives parameters to never-freed blocks without a phase, capped per size by one step's gradients. */
        private void matchParameters(List<CategorizedBlock> out, int firstRequest, Map<Long, Integer> left) {
            if (left.isEmpty()) {
                return;
            }
            for (int k = 0; k < out.size(); k++) {
                CategorizedBlock b = out.get(k);
                boolean candidate = b.freeEntry() < 0
                        && (b.request() < 0 || phase[b.request()] == Phase.UNKNOWN)
                        && b.rule() != CategoryRule.FREED_BEFORE_NEXT_REQUEST;
                if (!candidate) {
                    continue;
                }
                // start blocks come first, in the order RequestSequence numbers them
                long size = k < firstRequest ? SizeRules.roundSize(seq.startBlockSizeOf(k), config) : b.bytes();
                Integer n = left.get(size);
                if (n != null && n > 0) {
                    left.put(size, n - 1);
                    out.set(k, b.withRule(CategoryRule.MATCHES_A_GRADIENT));
                }
            }
        }
    }
}
