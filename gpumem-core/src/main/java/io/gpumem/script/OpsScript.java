package io.gpumem.script;

import io.gpumem.alloc.SizeRules;
import io.gpumem.config.AllocatorConfig;
import io.gpumem.config.ConfigException;
import io.gpumem.device.SimulatedDevice;
import io.gpumem.size.ByteSize;
import java.io.ByteArrayInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.nio.ByteBuffer;
import java.nio.CharBuffer;
import java.nio.charset.CharacterCodingException;
import java.nio.charset.CodingErrorAction;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.regex.Pattern;
import org.jspecify.annotations.Nullable;

/**
 * A parsed ops script: the text format that {@code gpumem sim} runs and that trace tools can emit or read.
 *
 * <p>Format, one op per line ({@code #} starts a comment, blank lines are ignored, words are separated by
 * spaces or tabs; line ends, a byte-order mark and the longest line are {@link Utf8Lines}'s rules):
 * <pre>
 * device capacity=SIZE [granularity=SIZE] [held=SIZE]
 * config STRING
 * alloc NAME SIZE [stream=N]
 * free NAME
 * record_stream NAME STREAM
 * complete_events | empty_cache | reset_peak | stats
 * set_fraction F
 * summary [abbreviated]
 * snapshot FILE
 * </pre>
 * SIZE is parsed by {@link ByteSize}. NAME is any word without {@code =} or {@code #}.
 *
 * <p>Parsing is complete before anything runs, and it checks everything that does not depend on the
 * allocator: syntax, sizes, config strings (parsed with {@link AllocatorConfig#parse}), fractions, that
 * {@code device} appears at most once and before any allocator op and describes a device the allocator can run on
 * with any configuration ({@link SizeRules#expandableSegmentsUnsupported}), and the name discipline: an {@code alloc}
 * binds a name that must not be live, {@code free} and {@code record_stream} need a live name, so an unknown
 * name or a double free is reported with the lines involved. An allocation that runs out of memory at run time
 * leaves its name bound but empty; runners skip later {@code free}/{@code record_stream} of such a name.
 *
 * <p>Invariant: an {@code OpsScript} only exists for a script with no errors; the first error throws a
 * {@link ScriptException} naming its line.
 */
public final class OpsScript {
    /**
     * The verbs a line can start with, in the order the format above lists them: the one list the parser's
     * "unknown op" message and format detection ({@code TraceReaders}, which recognises a script by its first
     * word) both read.
     */
    public static final List<String> VERBS = List.of(
            "device",
            "config",
            "alloc",
            "free",
            "record_stream",
            "complete_events",
            "empty_cache",
            "set_fraction",
            "reset_peak",
            "summary",
            "stats",
            "snapshot");

    private static final Pattern NAME = Pattern.compile("[^=#\\s]+");
    private static final Pattern STREAM = Pattern.compile("[0-9]+");
    private static final Pattern FRACTION = Pattern.compile("[0-9]+(\\.[0-9]*)?|\\.[0-9]+");

    private final List<ScriptOp> ops;
    private final ScriptOp.@Nullable DeviceSettings device;

    private OpsScript(List<ScriptOp> ops, ScriptOp.@Nullable DeviceSettings device) {
        this.ops = List.copyOf(ops);
        this.device = device;
    }

    /** The ops in script order. */
    public List<ScriptOp> ops() {
        return ops;
    }

    /** The {@code device} line, or null when the script has none (runners then use their default device). */
    public ScriptOp.@Nullable DeviceSettings device() {
        return device;
    }

    /**
     * The configuration the allocator decides with when the op at {@code index} runs ({@code ops().size()}: after
     * the last): the defaults re-parsed ({@link AllocatorConfig#reparse}) with each {@code config} line before it, in
     * script order. The lines before the first allocator op are the environment the allocator is created with and
     * later ones {@code _set_allocator_settings} calls, and PyTorch parses both by the same rule (which resets
     * {@code max_split_size_mb}, {@code roundup_power2_divisions} and {@code garbage_collection_threshold} unless
     * named), so this is what {@code gpumem sim}'s allocator has at that op, and what the trace reader records for a
     * script. Its {@link AllocatorConfig#raw() raw} string parses to it: the line's own text when one line made
     * it, else {@link AllocatorConfig#toConfString()}.
     */
    public AllocatorConfig configAt(int index) {
        AllocatorConfig config = AllocatorConfig.defaults();
        int lines = 0;
        for (ScriptOp op : ops.subList(0, index)) {
            if (op instanceof ScriptOp.Config c) {
                config = config.reparse(c.conf()); // parsed once already: the parser checked every line
                lines++;
            }
        }
        return lines <= 1 ? config : AllocatorConfig.parse(config.toConfString());
    }

    /**
     * The configuration the allocator is created with: {@link #configAt} the first allocator op (any op but
     * {@code device} and {@code config}), or after the last op when there is none.
     */
    public AllocatorConfig initialConfig() {
        int first = 0;
        while (first < ops.size()
                && (ops.get(first) instanceof ScriptOp.Config || ops.get(first) instanceof ScriptOp.DeviceSettings)) {
            first++;
        }
        return configAt(first);
    }

    /**
     * Parses a script held in a string: its UTF-8 encoding, read exactly as {@link #parse(InputStream)} reads a
     * file's bytes (one line splitter, {@link Utf8Lines}, for every source).
     *
     * @throws ScriptException naming the first bad line
     * @throws IllegalArgumentException if the text holds a lone surrogate (it is not Unicode text, and no UTF-8
     *     encodes it)
     */
    public static OpsScript parse(String text) {
        ByteBuffer bytes;
        try {
            bytes = StandardCharsets.UTF_8
                    .newEncoder()
                    .onMalformedInput(CodingErrorAction.REPORT)
                    .onUnmappableCharacter(CodingErrorAction.REPORT)
                    .encode(CharBuffer.wrap(text));
        } catch (CharacterCodingException e) {
            throw new IllegalArgumentException("script text is not Unicode text (a lone surrogate)", e);
        }
        try {
            return parse(new ByteArrayInputStream(bytes.array(), bytes.arrayOffset(), bytes.limit()));
        } catch (IOException e) {
            throw new UncheckedIOException(e); // a byte array does not fail
        }
    }

    /**
     * Parses a script from bytes that must be UTF-8 text (read to the end, not closed); a byte that is not
     * UTF-8 is a {@link ScriptException} naming its line and column. Lines are split by {@link Utf8Lines}.
     *
     * @throws ScriptException naming the first bad line
     * @throws IOException     if reading fails
     */
    public static OpsScript parse(InputStream in) throws IOException {
        return new Parser().run(new Utf8Lines(in));
    }

    /** Parser state: the ops so far and, per name, where it was last allocated or freed. */
    private static final class Parser {
        private final List<ScriptOp> ops = new ArrayList<>();
        private final Map<String, Integer> liveSince = new HashMap<>();
        private final Map<String, int[]> freed = new HashMap<>(); // name -> {alloc line, free line}
        private ScriptOp.@Nullable DeviceSettings device;
        private boolean allocatorUsed;
        private int line;

        OpsScript run(Utf8Lines in) throws IOException {
            for (String text = in.next(); text != null; text = in.next()) {
                line++;
                int hash = text.indexOf('#');
                String body = (hash >= 0 ? text.substring(0, hash) : text).strip();
                if (!body.isEmpty()) {
                    ops.add(parseLine(body));
                }
            }
            return new OpsScript(ops, device);
        }

        private ScriptOp parseLine(String body) {
            String[] w = body.split("[ \\t]+");
            String verb = w[0];
            if (verb.equals("config")) {
                return config(body.substring("config".length()).strip());
            }
            ScriptOp op = switch (verb) {
                case "device" -> device(w);
                case "alloc" -> alloc(w);
                case "free" -> {
                    arity(w, 2, "free NAME");
                    yield new ScriptOp.Free(line, release(w[1], "free"));
                }
                case "record_stream" -> {
                    arity(w, 3, "record_stream NAME STREAM");
                    String name = live(w[1], "record_stream");
                    yield new ScriptOp.RecordStream(line, name, stream(w[2]));
                }
                case "complete_events" -> bare(w, new ScriptOp.CompleteEvents(line));
                case "empty_cache" -> bare(w, new ScriptOp.EmptyCache(line));
                case "reset_peak" -> bare(w, new ScriptOp.ResetPeak(line));
                case "stats" -> bare(w, new ScriptOp.Stats(line));
                case "set_fraction" -> {
                    arity(w, 2, "set_fraction F");
                    yield new ScriptOp.SetFraction(line, fraction(w[1]));
                }
                case "snapshot" -> {
                    arity(w, 2, "snapshot FILE");
                    yield new ScriptOp.Snapshot(line, w[1]);
                }
                case "summary" -> {
                    if (w.length > 2 || (w.length == 2 && !w[1].equals("abbreviated"))) {
                        throw error("usage: summary [abbreviated]");
                    }
                    yield new ScriptOp.Summary(line, w.length == 2);
                }
                default ->
                    throw error("unknown op '" + verb + "' (expected "
                            + String.join(", ", VERBS.subList(0, VERBS.size() - 1)) + " or " + VERBS.getLast() + ")");
            };
            if (!(op instanceof ScriptOp.DeviceSettings)) {
                allocatorUsed = true;
            }
            return op;
        }

        private ScriptOp config(String conf) {
            if (conf.isEmpty()) {
                throw error("usage: config STRING (a PYTORCH_CUDA_ALLOC_CONF value)");
            }
            try {
                AllocatorConfig.parse(conf);
            } catch (ConfigException e) {
                throw error("bad config: " + e.getMessage());
            }
            return new ScriptOp.Config(line, conf);
        }

        private ScriptOp device(String[] w) {
            if (device != null) {
                throw error("a second device line (the device was set on line " + device.line() + ")");
            }
            if (allocatorUsed) {
                throw error("device must come before any allocator op");
            }
            Map<String, Long> kv = new HashMap<>();
            for (int i = 1; i < w.length; i++) {
                int eq = w[i].indexOf('=');
                String key = eq < 0 ? w[i] : w[i].substring(0, eq);
                if (eq < 0 || !(key.equals("capacity") || key.equals("granularity") || key.equals("held"))) {
                    throw error("usage: device capacity=SIZE [granularity=SIZE] [held=SIZE]; got '" + w[i] + "'");
                }
                if (kv.containsKey(key)) {
                    throw error("device " + key + " given twice");
                }
                kv.put(key, size(w[i].substring(eq + 1), "device " + key));
            }
            Long capacity = kv.get("capacity");
            if (capacity == null) {
                throw error("device needs capacity=SIZE");
            }
            long granularity = kv.getOrDefault("granularity", 0L);
            long held = kv.getOrDefault("held", 0L);
            if (capacity <= 0) {
                throw error("device capacity must be positive");
            }
            if (kv.containsKey("granularity") && Long.bitCount(granularity) != 1) {
                throw error("device granularity must be a power of two, got " + granularity);
            }
            // any config line, or a compare of this script under other settings, may turn expandable segments on:
            // a device that could not hold them is refused here, by the allocator's own rule, not part way through
            String unsupported = SizeRules.expandableSegmentsUnsupported(
                    capacity, kv.containsKey("granularity") ? granularity : SimulatedDevice.DEFAULT_GRANULARITY);
            if (unsupported != null) {
                throw error("device cannot hold expandable segments: " + unsupported);
            }
            if (held >= capacity) {
                // nothing would be left to allocate: sim could only fail every request, and the what-if replays of
                // compare and analyze have no device to size, so every command refuses it here, with the line
                throw error("device held=" + held + " leaves no memory: it must be less than capacity=" + capacity);
            }
            device = new ScriptOp.DeviceSettings(line, capacity, granularity, held);
            return device;
        }

        private ScriptOp alloc(String[] w) {
            if (w.length < 3 || w.length > 4) {
                throw error("usage: alloc NAME SIZE [stream=N]");
            }
            String name = name(w[1]);
            Integer since = liveSince.get(name);
            if (since != null) {
                throw error("'" + name + "' is still allocated (line " + since + "); free it first");
            }
            long size = size(w[2], "alloc size");
            if (size < 0) {
                throw error("bad size '" + w[2] + "': a size cannot be negative");
            }
            long stream = ScriptOp.DEFAULT_STREAM;
            if (w.length == 4) {
                if (!w[3].startsWith("stream=")) {
                    throw error("usage: alloc NAME SIZE [stream=N]; got '" + w[3] + "'");
                }
                stream = stream(w[3].substring("stream=".length()));
            }
            liveSince.put(name, line);
            freed.remove(name);
            return new ScriptOp.Alloc(line, name, size, stream);
        }

        /** Checks that a name is live and unbinds it. */
        private String release(String word, String verb) {
            String name = live(word, verb);
            freed.put(name, new int[] {liveSince.remove(name), line});
            return name;
        }

        private String live(String word, String verb) {
            String name = name(word);
            if (!liveSince.containsKey(name)) {
                int[] f = freed.get(name);
                if (f != null) {
                    throw error((verb.equals("free") ? "double free of '" : verb + " of freed '") + name
                            + "' (allocated on line " + f[0] + ", freed on line " + f[1] + ")");
                }
                throw error(verb + " of unknown name '" + name + "'");
            }
            return name;
        }

        private String name(String word) {
            if (!NAME.matcher(word).matches()) {
                throw error("bad name '" + word + "' (a name is one word without '=')");
            }
            return word;
        }

        private long size(String text, String what) {
            try {
                return ByteSize.parse(text);
            } catch (IllegalArgumentException e) {
                throw error(what + ": " + e.getMessage());
            }
        }

        private long stream(String text) {
            if (!STREAM.matcher(text).matches()) {
                throw error("bad stream '" + text + "' (a stream is a number, 0 for the default stream)");
            }
            try {
                return Long.parseLong(text);
            } catch (NumberFormatException e) {
                throw error("bad stream '" + text + "': too large");
            }
        }

        private double fraction(String text) {
            if (!FRACTION.matcher(text).matches()) {
                throw error("bad fraction '" + text + "' (a number in [0, 1])");
            }
            double f = Double.parseDouble(text);
            if (f > 1.0) {
                // PyTorch: "Invalid fraction value: {}. Allowed range: 0~1"
                throw error("Invalid fraction value: " + text + ". Allowed range: 0~1");
            }
            return f;
        }

        private ScriptOp bare(String[] w, ScriptOp op) {
            if (w.length != 1) {
                throw error(w[0] + " takes no arguments");
            }
            return op;
        }

        private void arity(String[] w, int n, String usage) {
            if (w.length != n) {
                throw error("usage: " + usage);
            }
        }

        private ScriptException error(String detail) {
            return new ScriptException(line, detail);
        }
    }
}
