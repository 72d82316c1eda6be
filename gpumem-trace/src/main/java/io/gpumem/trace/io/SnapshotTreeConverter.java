package io.gpumem.trace.io;

import io.gpumem.alloc.Pool;
import io.gpumem.alloc.SizeRules;
import io.gpumem.config.AllocatorConfig;
import io.gpumem.history.BlockHistory;
import io.gpumem.history.BlockInfo;
import io.gpumem.history.BlockState;
import io.gpumem.history.FileKeys;
import io.gpumem.history.Frame;
import io.gpumem.history.PoolId;
import io.gpumem.history.SegmentInfo;
import io.gpumem.history.TraceAction;
import io.gpumem.history.TraceEntry;
import java.math.BigInteger;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.HashMap;
import java.util.HashSet;
import java.util.IdentityHashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.stream.Collectors;
import org.jspecify.annotations.Nullable;

/**
 * Turns the plain value tree {@link PlainDataUnpickler} decodes from a PyTorch snapshot (dicts, lists, tuples, ints,
 * strings) into a {@link TraceSnapshot}, for {@link PytorchSnapshotReader}; holds the file name and the frame-list
 * identity cache. It is also the sink of the device trace entries the decoder hands over as it meets them
 * ({@link PlainDataUnpickler.TraceSink}): each is checked and stored in its device's {@link TraceColumns} at once, and
 * the tree keeps an empty list in its place. The rest of the tree (segments, settings, annotations) is checked and
 * converted field by field at the end.
 *
 * <p>Invariants: at most one record (segment, block, history item, trace entry) per byte of the file; every error is
 * a {@link TraceFormatException} naming the file and the key path ({@code device_traces[0][17].size}). One instance
 * converts one file.
 */
final class SnapshotTreeConverter implements PlainDataUnpickler.TraceSink {
    /** Slots of the table of recently converted frame lists (a power of two). */
    private static final int RECENT_LISTS = 1 << 12;

    /** The file read, named in every error. */
    final String file;

    private final ReadLimits limits;
    /**
     * The file's frame lists converted lately, by identity, in a direct-mapped table ({@link #RECENT_LISTS}
     * slots by identity hash): a file that shares its lists (gpumem's own snapshots name a few hundred from
     * millions of entries) converts each about once, and one that gives every entry a list of its own
     * (PyTorch's) keeps no more than the table. A list met again after its slot was reused is converted again,
     * to the same shared list ({@link #stacks}), so the table changes only the cost, never the result.
     */
    private final Object[] recentLists = new Object[RECENT_LISTS];

    @SuppressWarnings("unchecked")
    private final List<Frame>[] recentFrames = (List<Frame>[]) new List<?>[RECENT_LISTS];
    /**
     * One list per distinct stack. A recording gives every entry a list of its own, though a step's stacks
     * repeat: kept as they come, a 600 MB recording's 3 M entries held 3 M lists of about thirty frames (some
     * 450 MB, most of them equal to one met before), which the collector scanned on every pass. Equal stacks
     * now share the first list met, and each entry's own list is garbage once converted.
     */
    private final HashMap<List<Frame>, List<Frame>> stacks = new HashMap<>();
    /**
     * The frame each of the file's frame dicts converted to. A recording gives every entry a list of its own but
     * shares the frame dicts among them (a step's stacks repeat), so a dict is converted once, not once per entry
     * that names it (on {@code lm2.7b-train-step.pickle}, about thirty per entry).
     */
    private final IdentityHashMap<Object, Frame> frameOfDict = new IdentityHashMap<>();
    /**
     * Records (segments, blocks, history items, trace entries) still allowed: one per byte of the file. A
     * pickle can refer to one list many times for a few bytes each; without this bound a small file could
     * expand into more records than memory holds.
     */
    private long recordBudget;
    /** The device trace lists the decoder handed over, with the columns their entries went into. */
    private final IdentityHashMap<Object, TraceColumns> streamed = new IdentityHashMap<>();
    /** Entries handed over so far, all devices (checked against the entry limit as they come). */
    private long streamedEntries;
    /** The streamed lists already counted against the record budget (a list referred to again counts again). */
    private final Set<Object> spentFor = Collections.newSetFromMap(new IdentityHashMap<>());

    SnapshotTreeConverter(String file, ReadLimits limits, long fileBytes) {
        this.file = file;
        this.limits = limits;
        this.recordBudget = Math.max(16, fileBytes);
    }

    @Override
    public PlainDataUnpickler.EntrySink open(Object list, int device) {
        TraceColumns columns = new TraceColumns();
        streamed.put(list, columns);
        return (value, index) -> {
            if (++streamedEntries > limits.maxEntries()) {
                throw error("device_traces", "more than " + limits.maxEntries() + " trace entries (limit)");
            }
            entry(columns, value, device, index);
        };
    }

    private void spend(String where) {
        if (--recordBudget < 0) {
            throw overBudget(where);
        }
    }

    private TraceFormatException overBudget(String where) {
        return error(
                where,
                "the file refers to the same values more often than it has bytes (a pickle built"
                        + " to expand when read); refused");
    }

    TraceSnapshot convert(Object root) {
        if (root instanceof List<?> list) {
            return new TraceSnapshot(
                    file,
                    SourceFormat.PYTORCH_SEGMENT_LIST,
                    segments(list, "segments"),
                    List.of(),
                    null,
                    null,
                    Map.of(),
                    true);
        }
        if (!(root instanceof Map<?, ?> top)) {
            throw error("", "expected a snapshot dict or a list of segments, got " + typeName(root));
        }
        Object segs = top.get("segments");
        if (segs == null) {
            throw error("segments", "missing (not a PyTorch memory snapshot)");
        }
        List<SegmentInfo> segments = segments(asList(segs, "segments"), "segments");
        List<List<TraceEntry>> traces = new ArrayList<>();
        Object dt = top.get("device_traces");
        long total = 0;
        if (dt != null) {
            List<?> devices = asList(dt, "device_traces");
            for (int d = 0; d < devices.size(); d++) {
                List<?> raw = asList(devices.get(d), "device_traces[" + d + "]");
                TraceColumns columns = streamed.get(raw);
                int n = columns != null ? columns.size() : raw.size();
                total += n;
                if (total > limits.maxEntries()) {
                    throw error("device_traces", "more than " + limits.maxEntries() + " trace entries (limit)");
                }
                if (columns != null) {
                    // Each entry was spent for once as it was read; a list the file refers to again costs again.
                    if (!spentFor.add(raw)) {
                        recordBudget -= n;
                        if (recordBudget < 0) {
                            throw overBudget("device_traces[" + d + "]");
                        }
                    }
                    columns.trim();
                    traces.add(columns);
                } else {
                    traces.add(entries(raw, d));
                }
            }
        }
        Map<String, Object> settings = null;
        Object as = top.get("allocator_settings");
        if (as != null) {
            settings = stringKeyed(asMap(as, "allocator_settings"), "allocator_settings");
            checkSettings(settings);
        }
        List<Map<String, Object>> annotations = null;
        Object ea = top.get("external_annotations");
        if (ea != null) {
            List<?> raw = asList(ea, "external_annotations");
            annotations = new ArrayList<>(raw.size());
            for (int i = 0; i < raw.size(); i++) {
                String where = "external_annotations[" + i + "]";
                annotations.add(stringKeyed(asMap(raw.get(i), where), where));
            }
            annotations = Collections.unmodifiableList(annotations);
        }
        Map<String, Object> extra = new LinkedHashMap<>();
        for (Map.Entry<?, ?> e : top.entrySet()) {
            String k = key(e.getKey(), "");
            if (!k.equals("segments")
                    && !k.equals("device_traces")
                    && !k.equals("allocator_settings")
                    && !k.equals("external_annotations")) {
                extra.put(k, e.getValue());
            }
        }
        return new TraceSnapshot(
                file,
                SourceFormat.PYTORCH_SNAPSHOT,
                segments,
                traces,
                settings,
                annotations,
                Collections.unmodifiableMap(extra),
                true);
    }

    private List<SegmentInfo> segments(List<?> raw, String where) {
        List<SegmentInfo> out = new ArrayList<>(raw.size());
        for (int i = 0; i < raw.size(); i++) {
            out.add(segment(raw.get(i), where + "[" + i + "]"));
        }
        out.sort((a, b) -> Long.compareUnsigned(a.address(), b.address()));
        return Collections.unmodifiableList(out);
    }

    private SegmentInfo segment(Object o, String where) {
        spend(where);
        Map<?, ?> m = asMap(o, where);
        long address = requiredLong(m, "address", where);
        long total = requiredLong(m, "total_size", where);
        if (total < 0) {
            throw error(where + ".total_size", "negative size " + total);
        }
        int fields = 0;
        long requested = 0;
        if (m.containsKey("requested_size")) {
            requested = requiredLong(m, "requested_size", where);
            fields |= SegmentInfo.REQUESTED_SIZE;
        }
        PoolId pool = PoolId.DEFAULT;
        if (m.containsKey("segment_pool_id")) {
            pool = poolId(m.get("segment_pool_id"), where + ".segment_pool_id");
            fields |= SegmentInfo.POOL_ID;
        }
        boolean expandable = false;
        if (m.containsKey("is_expandable")) {
            expandable = bool(m.get("is_expandable"), where + ".is_expandable");
            fields |= SegmentInfo.EXPANDABLE;
        }
        String type = m.containsKey("segment_type")
                ? string(m.get("segment_type"), where + ".segment_type")
                : (total == 2L << 20 ? "small" : "large");
        List<Frame> frames = m.containsKey("frames") ? frames(m.get("frames"), where + ".frames") : null;
        if (m.containsKey("frames") && m.get("frames") == null) {
            fields |= SegmentInfo.FRAMES_NONE;
        }
        List<BlockInfo> blocks = List.of();
        if (m.containsKey("blocks")) {
            List<?> raw = asList(m.get("blocks"), where + ".blocks");
            List<BlockInfo> bl = new ArrayList<>(raw.size());
            long next = address;
            for (int i = 0; i < raw.size(); i++) {
                BlockInfo b = block(raw.get(i), where + ".blocks[" + i + "]", next);
                bl.add(b);
                next = b.address() + b.size();
            }
            // An immutable list holds its array itself: a walk of the end state (the rebuild's, the replay's end-state
            // comparison, once per check and cold by then) reaches each block one load sooner than through a
            // read-only view of an ArrayList, which was 3% of an oracle check.
            blocks = List.copyOf(bl);
        }
        Map<String, Object> extra = extra(
                m,
                where,
                "device",
                "address",
                "total_size",
                "allocated_size",
                "active_size",
                "requested_size",
                "stream",
                "segment_type",
                "segment_pool_id",
                "is_expandable",
                "frames",
                "blocks");
        Pool kind = "small".equals(type) ? Pool.SMALL : Pool.LARGE;
        long device = optionalLong(m, "device", where, 0);
        if (device < 0 || device > Integer.MAX_VALUE) {
            // a device index is a small non-negative int (PyTorch's is 8 bits): cut to 32 it would name another
            throw error(where + ".device", "expected a device index (0 or more), got " + device);
        }
        return new SegmentInfo(
                (int) device,
                address,
                total,
                optionalLong(m, "allocated_size", where, 0),
                optionalLong(m, "active_size", where, 0),
                requested,
                optionalLong(m, "stream", where, 0),
                kind,
                expandable,
                frames,
                blocks,
                pool,
                FileKeys.of(fields, type.equals(kind.segmentType()) ? null : type, null, extra));
    }

    private BlockInfo block(Object o, String where, long computedAddress) {
        spend(where);
        Map<?, ?> m = asMap(o, where);
        int fields = 0;
        long address = computedAddress;
        if (m.containsKey("address")) {
            address = requiredLong(m, "address", where);
            fields |= BlockInfo.ADDRESS;
        }
        long size = requiredLong(m, "size", where);
        if (size < 0) {
            throw error(where + ".size", "negative size " + size);
        }
        long requested = 0;
        if (m.containsKey("requested_size")) {
            requested = requiredLong(m, "requested_size", where);
            fields |= BlockInfo.REQUESTED_SIZE;
        }
        String stateName = m.containsKey("state") ? string(m.get("state"), where + ".state") : "inactive";
        BlockState state = BlockState.ofWireName(stateName);
        List<Frame> frames = m.containsKey("frames") ? frames(m.get("frames"), where + ".frames") : null;
        if (m.containsKey("frames") && m.get("frames") == null) {
            fields |= BlockInfo.FRAMES_NONE;
        }
        List<BlockHistory> history = null;
        if (m.containsKey("history")) {
            List<?> raw = asList(m.get("history"), where + ".history");
            List<BlockHistory> h = new ArrayList<>(raw.size());
            for (int i = 0; i < raw.size(); i++) {
                String w = where + ".history[" + i + "]";
                spend(w);
                Map<?, ?> hm = asMap(raw.get(i), w);
                h.add(new BlockHistory(
                        optionalLong(hm, "addr", w, 0),
                        optionalLong(hm, "real_size", w, 0),
                        hm.containsKey("frames") ? frames(hm.get("frames"), w + ".frames") : null));
            }
            history = Collections.unmodifiableList(h);
        }
        Map<String, Object> extra = extra(m, where, "address", "size", "requested_size", "state", "frames", "history");
        return new BlockInfo(
                address,
                size,
                requested,
                state,
                frames,
                FileKeys.of(fields, stateName.equals(state.wireName()) ? null : stateName, history, extra));
    }

    private List<TraceEntry> entries(List<?> raw, int device) {
        TraceColumns out = new TraceColumns();
        for (int i = 0; i < raw.size(); i++) {
            entry(out, raw.get(i), device, i);
        }
        out.trim();
        return out;
    }

    /** Checks one entry of {@code device_traces[device]} and appends it to {@code out}. */
    private void entry(TraceColumns out, Object o, int device, int index) {
        if (--recordBudget < 0) {
            throw overBudget(entryWhere(device, index));
        }
        if (o instanceof PlainEntryDecoder.PlainEntry p) {
            // the fast decoder read this stream as a pickled negative; the dict path checks the pickled value
            // itself, so that an unsigned 2^64-1 is kept bit for bit
            if ((p.keys & TraceEntry.STREAM) != 0 && p.stream < 0) {
                throw error(entryWhere(device, index) + ".stream", "negative stream " + p.stream);
            }
            store(out, device, index, p, null);
            return;
        }
        if (!(o instanceof Map<?, ?> m)) {
            throw error(entryWhere(device, index), "expected a dict, got " + typeName(o));
        }
        Object act = m.get("action");
        if (!(act instanceof String actionName)) {
            throw error(
                    entryWhere(device, index) + ".action",
                    act == null ? "missing" : "expected a string, got " + typeName(act));
        }
        // a dict the fast decoder did not take (other keys, other value types): read into the same entry
        PlainEntryDecoder.PlainEntry p = new PlainEntryDecoder.PlainEntry();
        p.action = actionName;
        Map<String, Object> extra = null;
        for (Map.Entry<?, ?> e : m.entrySet()) {
            Object v = e.getValue();
            String key = key(e.getKey(), entryWhere(device, index));
            switch (key) {
                case "action" -> {}
                case "addr" -> p.addr = number(p, TraceEntry.ADDR, v, device, index, key);
                case "size" -> p.size = number(p, TraceEntry.SIZE, v, device, index, key);
                case "stream" -> {
                    if (isNegative(v)) { // before conversion: a negative beyond a long is still a negative stream
                        throw error(entryWhere(device, index) + ".stream", "negative stream " + v);
                    }
                    p.stream = number(p, TraceEntry.STREAM, v, device, index, key);
                }
                case "time_us" -> p.timeUs = number(p, TraceEntry.TIME_US, v, device, index, key);
                case "device_free" -> p.deviceFree = number(p, TraceEntry.DEVICE_FREE, v, device, index, key);
                case "frames" -> {
                    p.hasFrames = true;
                    p.frames = v;
                }
                default -> {
                    if (extra == null) {
                        extra = new LinkedHashMap<>(4);
                    }
                    extra.put(key, v);
                }
            }
        }
        store(out, device, index, p, extra);
    }

    /** {@code v} as the integer of entry key {@code key}, noted in {@code p}'s keys as {@code flag}. */
    private long number(PlainEntryDecoder.PlainEntry p, int flag, Object v, int device, int index, String key) {
        p.keys |= flag;
        return entryLong(v, device, index, key);
    }

    /** Checks what every entry must hold and appends it, with {@code extra} keys (null: none) kept for writing. */
    private void store(
            TraceColumns out,
            int device,
            int index,
            PlainEntryDecoder.PlainEntry p,
            @Nullable Map<String, Object> extra) {
        int fields = p.hasFrames && p.frames == null ? p.keys | TraceEntry.FRAMES_NONE : p.keys;
        String actionName = p.action;
        List<Frame> frames = p.hasFrames ? entryFrames(p.frames, device, index) : null;
        p.converted = frames;
        if ((fields & TraceEntry.SIZE) != 0 && p.size < 0) {
            throw error(entryWhere(device, index) + ".size", "negative size " + p.size);
        }
        TraceAction action = TraceAction.ofWireName(actionName);
        if (action == TraceAction.UNKNOWN && !actionName.equals(OpsScriptReader.EMPTY_CACHE)) {
            // (gpumem's own empty_cache entries, written from ops scripts, are the one extension read back)
            throw error(
                    entryWhere(device, index) + ".action",
                    "unknown action '" + shorten(actionName) + "' (expected one of " + KNOWN_ACTIONS + ")");
        }
        if (action != TraceAction.ANNOTATE && action != TraceAction.UNKNOWN && (fields & TraceEntry.SIZE) == 0) {
            throw error(entryWhere(device, index) + ".size", "missing (every " + actionName + " entry has one)");
        }
        if ((action.isSegmentEvent()
                        || action == TraceAction.ALLOC
                        || action == TraceAction.FREE_REQUESTED
                        || action == TraceAction.FREE_COMPLETED)
                && (fields & TraceEntry.ADDR) == 0) {
            throw error(entryWhere(device, index) + ".addr", "missing (every " + actionName + " entry has one)");
        }
        out.append(
                action,
                p.addr,
                p.size,
                p.stream,
                p.timeUs,
                frames,
                p.deviceFree,
                FileKeys.of(
                        fields,
                        actionName.equals(action.wireName()) ? null : actionName,
                        null,
                        extra == null ? null : Collections.unmodifiableMap(extra)));
    }

    private long entryLong(Object v, int device, int index, String field) {
        if (v instanceof Integer i) {
            return i;
        }
        if (v instanceof Long l) {
            return l;
        }
        return toLong(v, entryWhere(device, index) + "." + field);
    }

    private static boolean isNegative(Object v) {
        return v instanceof Integer i
                ? i < 0
                : v instanceof Long l ? l < 0 : v instanceof BigInteger b && b.signum() < 0;
    }

    /**
     * Checks the {@code allocator_settings} keys that replays read: each known key must have PyTorch's type and
     * range. Keys a newer PyTorch adds are kept unchecked.
     */
    private void checkSettings(Map<String, Object> settings) {
        for (Map.Entry<String, Object> e : settings.entrySet()) {
            String where = "allocator_settings." + e.getKey();
            Object v = e.getValue();
            switch (e.getKey()) {
                case "PYTORCH_CUDA_ALLOC_CONF" -> string(v, where);
                case "expandable_segments",
                        "release_lock_on_cudamalloc",
                        "pinned_use_cuda_host_register",
                        "graph_capture_record_stream_reuse" -> {
                    if (!(v instanceof Boolean)) {
                        throw error(where, "expected a bool, got " + typeName(v));
                    }
                }
                case "max_split_size", "max_non_split_rounding" -> {
                    // PyTorch parses both from whole MiB of at least 20 (kLargeBuffer; the spec's config table); a
                    // negative MiB count wraps to 2^64 - 1 MiB, reported as -1 MiB
                    long n = toLong(v, where);
                    if (n != -1
                            && n != AllocatorConfig.NEGATIVE_MAX_SPLIT_SIZE_REPORTED
                            && (n < SizeRules.LARGE_BUFFER || n % (1L << 20) != 0)) {
                        throw error(
                                where,
                                "expected -1 (unlimited), -1048576 (a negative MiB count) or a whole number of MiB"
                                        + " of at least 20, got " + n);
                    }
                }
                case "pinned_num_register_threads" -> {
                    long n = toLong(v, where);
                    if (n < 1 || n > 128 || Long.bitCount(n) != 1) {
                        throw error(where, "expected a power of two up to 128, got " + v);
                    }
                }
                case "garbage_collection_threshold" -> {
                    if (!(v instanceof Number n) || v instanceof BigInteger) {
                        throw error(where, "expected a float, got " + typeName(v));
                    }
                    double t = n.doubleValue();
                    if (!(t >= 0 && t <= 1)) {
                        throw error(where, "expected a fraction between 0 and 1, got " + v);
                    }
                }
                case "roundup_power2_divisions" -> {
                    Map<?, ?> table = asMap(v, where);
                    for (Map.Entry<?, ?> d : table.entrySet()) {
                        String w = where + "[" + shorten(String.valueOf(d.getKey())) + "]";
                        if (!(d.getKey() instanceof String k)
                                || !k.matches("[1-9][0-9]{0,9}")
                                || Long.bitCount(Long.parseLong(k)) != 1) {
                            throw error(w, "expected a power-of-two size in MiB as a string key");
                        }
                        long div = toLong(d.getValue(), w);
                        if (div < 0 || div > (1 << 20) || (div != 0 && Long.bitCount(div) != 1)) {
                            throw error(w, "expected 0 or a power-of-two division count up to 1048576, got " + div);
                        }
                    }
                }
                default -> {}
            }
        }
    }

    private static String shorten(String s) {
        return s.length() <= 64 ? s : s.substring(0, 64) + "...";
    }

    private static String entryWhere(int device, int index) {
        return "device_traces[" + device + "][" + index + "]";
    }

    /**
     * An entry's frames: the list already built for the same pickled object when there is one (most entries: a
     * stack is memoised once and referenced after), so that the entry's location, a string, is built only for
     * a list read for the first time (it names the entry in an error).
     */
    private @Nullable List<Frame> entryFrames(@Nullable Object o, int device, int index) {
        List<Frame> cached = o == null ? null : recent(o);
        return cached != null ? cached : frames(o, entryWhere(device, index) + ".frames");
    }

    private List<Frame> frames(Object o, String where) {
        if (o == null) {
            return null;
        }
        List<Frame> cached = recent(o);
        if (cached != null) {
            return cached;
        }
        List<?> raw = asList(o, where);
        Frame[] out = new Frame[raw.size()];
        for (int i = 0; i < out.length; i++) {
            Object dict = raw.get(i);
            // a Frame: the list is a stack made here, which the decoder kept for an entry's own list and the
            // file names again; it converts to itself (the same shared list, from stacks)
            Frame known = dict instanceof Frame f ? f : dict == null ? null : frameOfDict.get(dict);
            if (known != null) {
                out[i] = known;
                continue;
            }
            // Locations are built only on the error path: frames are most of a snapshot.
            if (!(dict instanceof Map<?, ?> m)) {
                throw error(where + "[" + i + "]", "expected a dict, got " + typeName(dict));
            }
            Object fn = m.get("filename");
            Object nm = m.get("name");
            Object ln = m.get("line");
            if (fn != null && !(fn instanceof String)) {
                throw error(where + "[" + i + "].filename", "expected a string, got " + typeName(fn));
            }
            if (nm != null && !(nm instanceof String)) {
                throw error(where + "[" + i + "].name", "expected a string, got " + typeName(nm));
            }
            long line = ln instanceof Integer n ? n : ln == null ? 0 : toLong(ln, where + "[" + i + "].line");
            out[i] = new Frame(fn == null ? "" : (String) fn, line, nm == null ? "" : (String) nm);
            frameOfDict.put(dict, out[i]);
        }
        List<Frame> fresh = List.of(out);
        List<Frame> list = stacks.putIfAbsent(fresh, fresh);
        if (list == null) {
            list = fresh;
        }
        remember(o, list);
        return list;
    }

    /** Puts {@code o} and its frames in the table of recent lists. */
    private void remember(Object o, List<Frame> frames) {
        int slot = System.identityHashCode(o) & (RECENT_LISTS - 1);
        recentLists[slot] = o;
        recentFrames[slot] = frames;
    }

    /** The frames {@code o} converted to, when it is in the table of recent lists; else null. */
    private @Nullable List<Frame> recent(Object o) {
        int slot = System.identityHashCode(o) & (RECENT_LISTS - 1);
        return PlainDataUnpickler.same(recentLists[slot], o) ? recentFrames[slot] : null;
    }

    private PoolId poolId(Object o, String where) {
        Object[] parts;
        if (o instanceof Object[] a) {
            parts = a;
        } else if (o instanceof List<?> l) {
            parts = l.toArray();
        } else {
            throw error(where, "expected a pair of integers, got " + typeName(o));
        }
        if (parts.length != 2) {
            throw error(where, "expected a pair of integers, got " + parts.length + " values");
        }
        return new PoolId(toLong(parts[0], where + "[0]"), toLong(parts[1], where + "[1]"));
    }

    private Map<String, Object> extra(Map<?, ?> m, String where, String... known) {
        Map<String, Object> extra = null;
        outer:
        for (Map.Entry<?, ?> e : m.entrySet()) {
            String k = key(e.getKey(), where);
            for (String kn : known) {
                if (kn.equals(k)) {
                    continue outer;
                }
            }
            if (extra == null) {
                extra = new LinkedHashMap<>();
            }
            extra.put(k, e.getValue());
        }
        return extra == null ? Map.of() : Collections.unmodifiableMap(extra);
    }

    /**
     * A key of a snapshot dict (the top level, a segment, a block, an entry), which PyTorch always writes as a
     * string; any other is refused, naming the dict, rather than kept as its Java text (a tuple's would read
     * {@code [Ljava.lang.Object;@...}) and written back as another key.
     */
    private String key(Object k, String where) {
        if (k instanceof String s) {
            return s;
        }
        throw error(
                where,
                "expected string keys, got a key of type " + typeName(k)
                        + (k instanceof Number ? " (" + shorten(k.toString()) + ")" : ""));
    }

    private Map<String, Object> stringKeyed(Map<?, ?> m, String where) {
        Map<String, Object> out = new LinkedHashMap<>();
        for (Map.Entry<?, ?> e : m.entrySet()) {
            if (!(e.getKey() instanceof String k)) {
                throw error(where, "expected string keys, got " + typeName(e.getKey()));
            }
            out.put(k, e.getValue());
        }
        return Collections.unmodifiableMap(out);
    }

    private long requiredLong(Map<?, ?> m, String key, String where) {
        Object v = m.get(key);
        if (v == null) {
            throw error(where + "." + key, "missing");
        }
        return toLong(v, where + "." + key);
    }

    private long optionalLong(Map<?, ?> m, String key, String where, long dflt) {
        Object v = m.get(key);
        return v == null ? dflt : toLong(v, where + "." + key);
    }

    private long toLong(Object v, String where) {
        if (v instanceof Integer || v instanceof Long || v instanceof Short || v instanceof Byte) {
            return ((Number) v).longValue();
        }
        if (v instanceof BigInteger b) {
            if (b.signum() >= 0 && b.bitLength() <= 64) {
                return b.longValue(); // unsigned 64-bit (stream handles, addresses)
            }
            if (b.bitLength() < 64) {
                return b.longValue();
            }
            throw error(where, "integer " + b + " does not fit in 64 bits");
        }
        throw error(where, "expected an integer, got " + typeName(v));
    }

    private boolean bool(Object v, String where) {
        if (v instanceof Boolean b) {
            return b;
        }
        if (v instanceof Integer i) {
            return i != 0;
        }
        throw error(where, "expected a bool, got " + typeName(v));
    }

    private String string(Object v, String where) {
        if (v instanceof String s) {
            return s;
        }
        throw error(where, "expected a string, got " + typeName(v));
    }

    private List<?> asList(Object v, String where) {
        if (v instanceof List<?> l) {
            return l;
        }
        if (v instanceof Object[] a) {
            return List.of(a);
        }
        throw error(where, "expected a list, got " + typeName(v));
    }

    private Map<?, ?> asMap(Object v, String where) {
        if (v instanceof Map<?, ?> m) {
            return m;
        }
        throw error(where, "expected a dict, got " + typeName(v));
    }

    private TraceFormatException error(String where, String message) {
        return new TraceFormatException(file, where, message);
    }

    /** The action names a trace entry may carry, for the message about an unknown one. */
    private static final String KNOWN_ACTIONS = Arrays.stream(TraceAction.values())
            .filter(a -> a != TraceAction.UNKNOWN)
            .map(TraceAction::wireName)
            .collect(Collectors.joining(", "));

    /** Python's name for the type of an unpickled value, for error messages. */
    static String typeName(Object v) {
        if (v == null) {
            return "None";
        }
        if (v instanceof String) {
            return "str";
        }
        if (v instanceof Integer || v instanceof Long || v instanceof BigInteger) {
            return "int";
        }
        if (v instanceof Double) {
            return "float";
        }
        if (v instanceof Boolean) {
            return "bool";
        }
        if (v instanceof List<?>) {
            return "list";
        }
        if (v instanceof Map<?, ?>) {
            return "dict";
        }
        if (v instanceof Object[]) {
            return "tuple";
        }
        if (v instanceof byte[]) {
            return "bytes";
        }
        if (v instanceof Set<?>) {
            // the decoder's sets are HashSets, its frozensets unmodifiable views of one
            return v instanceof HashSet<?> ? "set" : "frozenset";
        }
        return v.getClass().getSimpleName();
    }
}
