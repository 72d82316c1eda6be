package io.gpumem.config;

import java.math.BigInteger;
import java.util.Arrays;
import java.util.List;
import java.util.regex.Pattern;

/**
 * Parser for the {@code PYTORCH_CUDA_ALLOC_CONF} syntax (allocator.md §9), following PyTorch's
 * {@code CUDAAllocatorConfig::parseArgs} of the 2.5/2.6 era option by option.
 *
 * <p>Algorithm: {@link ConfigLexer} turns the string into words and the punctuation tokens {@code , : [ ]};
 * a cursor then walks the grammar {@code key ':' value (',' key ':' value)* [',']} where a value is a word
 * or, for {@code roundup_power2_divisions}, a bracketed list {@code '[' k ':' v (',' k ':' v)* ']'}.
 * Like PyTorch, a single trailing comma is accepted and a repeated key simply overrides the earlier one.
 *
 * <p>Invariants: the result starts from {@code previous} with {@code max_split_size},
 * {@code roundup_power2_divisions} and {@code garbage_collection_threshold} reset to their defaults
 * (PyTorch resets exactly these three on every parse); all other options keep their previous values unless
 * named. Nothing is partially applied: the first error throws a {@link ConfigException} naming the key and
 * {@code previous} is untouched (it is immutable anyway).
 *
 * <p>Numbers are read as PyTorch's {@code stoi}/{@code stoul}/{@code stod} read them, conversions included:
 * leading white space (tabs, newlines: the lexer drops only spaces) is skipped; a negative
 * {@code max_split_size_mb} wraps to a huge {@code size_t} and so is accepted
 * ({@link AllocatorConfig#NEGATIVE_MAX_SPLIT_SIZE}); a {@code roundup_power2_divisions} interval is an unsigned
 * 64-bit number ({@code stoul}: {@code -N} wraps modulo 2^64, and 2^63 is a power of two); a threshold may be a
 * hexadecimal float ({@code 0x0.8}).
 *
 * <p>Deliberate differences from PyTorch, all in the direction of rejecting garbage: integers must be whole
 * decimal numbers that fit in an {@code int} (PyTorch's {@code stoi} ignores trailing junk such as
 * {@code 25abc}), floats must be plain decimal or hexadecimal numbers, and an unterminated list is an error
 * instead of undefined behaviour. Error texts are PyTorch's, with the option name added where PyTorch leaves
 * it out.
 */
final class AllocatorConfigParser {

    private static final long MIB = 1L << 20;
    /** kLargeBuffer in MiB: the bound for max_split_size_mb and max_non_split_rounding_mb. */
    private static final int LARGE_BUFFER_MB = 20;
    /** kPinnedMaxRegisterThreads. */
    private static final int PINNED_MAX_REGISTER_THREADS = 128;

    private static final Pattern INTEGER = Pattern.compile("[+-]?[0-9]+");
    private static final Pattern DECIMAL = Pattern.compile("[+-]?([0-9]+\\.?[0-9]*|\\.[0-9]+)([eE][+-]?[0-9]+)?");
    /** A hexadecimal float as {@code strtod} reads it; the binary exponent is optional there (not in Java). */
    private static final Pattern HEX_FLOAT =
            Pattern.compile("[+-]?0[xX]([0-9a-fA-F]+\\.?[0-9a-fA-F]*|\\.[0-9a-fA-F]+)([pP][+-]?[0-9]+)?");

    private final List<String> tokens;
    private final AllocatorConfig.Builder out;
    private int i;

    private AllocatorConfigParser(List<String> tokens, AllocatorConfig.Builder out) {
        this.tokens = tokens;
        this.out = out;
    }

    static AllocatorConfig parse(String conf, AllocatorConfig previous) {
        AllocatorConfig.Builder b = previous.toBuilder()
                .maxSplitSize(AllocatorConfig.UNLIMITED)
                .roundupPower2Divisions(new int[AllocatorConfig.ROUNDUP_INTERVALS])
                .garbageCollectionThreshold(0.0)
                .raw(conf == null ? "" : conf);
        if (conf != null) {
            new AllocatorConfigParser(ConfigLexer.lex(conf), b).run();
        }
        return b.build();
    }

    private void run() {
        for (i = 0; i < tokens.size(); i++) {
            String key = tokens.get(i);
            switch (key) {
                case "max_split_size_mb" -> out.maxSplitSize(parseMaxSplitSize(key));
                case "max_non_split_rounding_mb" -> out.maxNonSplitRounding(parseMaxNonSplitRoundingMb(key) * MIB);
                case "garbage_collection_threshold" -> out.garbageCollectionThreshold(parseGcThreshold(key));
                case "roundup_power2_divisions" -> out.roundupPower2Divisions(parseRoundupDivisions(key));
                case "backend" -> out.backend(parseBackend(key));
                case "expandable_segments" -> out.expandableSegments(parseBoolean(key));
                // ROCm spells "cuda" as "hip"; PyTorch accepts both spellings on every build.
                case "release_lock_on_cudamalloc", "release_lock_on_hipmalloc" ->
                    out.releaseLockOnCudaMalloc(parseBoolean(key));
                case "pinned_use_cuda_host_register", "pinned_use_hip_host_register" ->
                    out.pinnedUseCudaHostRegister(parseBoolean(key));
                case "pinned_num_register_threads" -> out.pinnedNumRegisterThreads(parsePinnedThreads(key));
                case "pinned_use_background_threads" -> out.pinnedUseBackgroundThreads(parseBoolean(key));
                default -> throw new ConfigException(key, "Unrecognized CachingAllocator option: " + key);
            }
            if (i + 1 < tokens.size()) {
                expect(++i, ",", key);
            }
        }
    }

    // ------------------------------------------------------------------------------------------ options

    /** In bytes. */
    private long parseMaxSplitSize(String key) {
        int mb = intValue(key);
        if (mb < 0) {
            // size_t val1 = stoi(...) wraps, passes "val1 > 20", and is clamped to SIZE_MAX / MiB.
            return AllocatorConfig.NEGATIVE_MAX_SPLIT_SIZE;
        }
        if (mb <= LARGE_BUFFER_MB) {
            throw new ConfigException(
                    key,
                    "CachingAllocator option max_split_size_mb too small, must be > " + LARGE_BUFFER_MB + " (got " + mb
                            + ")");
        }
        return mb * MIB;
    }

    private long parseMaxNonSplitRoundingMb(String key) {
        int mb = intValue(key);
        // The 2.6 parser demanded > 20; the generic parser that replaced it (and our brief) accepts 20 itself.
        if (mb < LARGE_BUFFER_MB) {
            throw new ConfigException(
                    key,
                    "CachingAllocator option max_non_split_rounding_mb too small, must be >= " + LARGE_BUFFER_MB
                            + " (got " + mb + ")");
        }
        return mb;
    }

    private double parseGcThreshold(String key) {
        expect(++i, ":", key);
        String v = value(key);
        String t = skipSpace(v);
        double d;
        if (DECIMAL.matcher(t).matches()) {
            d = Double.parseDouble(t);
        } else if (HEX_FLOAT.matcher(t).matches()) {
            d = Double.parseDouble(t.indexOf('p') < 0 && t.indexOf('P') < 0 ? t + "p0" : t);
        } else {
            throw new ConfigException(key, "CachingAllocator option " + key + ": expected a number, got '" + v + "'");
        }
        if (!(d > 0)) {
            throw new ConfigException(
                    key,
                    "garbage_collect_threshold too small, set it 0.0~1.0 (option " + key
                            + " must be strictly between 0 and 1, got " + v + ")");
        }
        if (!(d < 1.0)) {
            throw new ConfigException(
                    key,
                    "garbage_collect_threshold too big, set it 0.0~1.0 (option " + key
                            + " must be strictly between 0 and 1, got " + v + ")");
        }
        return d;
    }

    private int[] parseRoundupDivisions(String key) {
        expect(++i, ":", key);
        int[] table = new int[AllocatorConfig.ROUNDUP_INTERVALS];
        if (!"[".equals(value(key))) {
            // Single value, kept by PyTorch for backwards compatibility: one count for every interval.
            int divisions = toInt(key, tokens.get(i));
            if (!isPowerOfTwo(divisions)) {
                throw new ConfigException(
                        key,
                        "For roundups, the divisions has to be power of 2 (option " + key + ", got " + divisions + ")");
            }
            Arrays.fill(table, divisions);
            return table;
        }
        int lastIndex = 0;
        boolean firstKey = true;
        while (++i < tokens.size() && !"]".equals(tokens.get(i))) {
            String interval = tokens.get(i);
            expect(++i, ":", key);
            if (++i >= tokens.size()) {
                throw new ConfigException(
                        key,
                        "Error parsing roundup_power2_divisions value: missing divisions after '" + interval + ":'");
            }
            int divisions = toInt(key, tokens.get(i));
            if (divisions != 0 && !isPowerOfTwo(divisions)) {
                throw new ConfigException(
                        key,
                        "For roundups, the divisions has to be power of 2 or 0 to disable roundup" + " (option " + key
                                + ", got " + divisions + ")");
            }
            if (">".equals(interval)) {
                // Pre-fix (2.5-era) behaviour, on purpose: '>' fills from the LAST key's own index inclusive,
                // so "[...,1024:4,>:8]" overwrites the 1024 entry with 8. PyTorch later changed this to
                // last index + 1; we reproduce the version our traces come from (allocator.md §9.3).
                Arrays.fill(table, lastIndex, table.length, divisions);
            } else {
                long mb = intervalMb(key, interval);
                // mb is unsigned (stoul): 2^63 is negative here, and has index 63
                int index = Math.min(63 - Long.numberOfLeadingZeros(mb), table.length - 1);
                if (firstKey) {
                    // The first key also covers every smaller size.
                    Arrays.fill(table, 0, index, divisions);
                    firstKey = false;
                }
                table[index] = divisions;
                lastIndex = index;
            }
            if (i + 1 >= tokens.size()) {
                throw new ConfigException(
                        key, "Error parsing CachingAllocator settings, expected ] to close the " + key + " list");
            }
            if (!"]".equals(tokens.get(i + 1))) {
                expect(++i, ",", key);
            }
        }
        if (i >= tokens.size()) {
            throw new ConfigException(
                    key, "Error parsing CachingAllocator settings, expected ] to close the " + key + " list");
        }
        return table;
    }

    /** The interval as {@code stoul} reads it: an unsigned 64-bit number, {@code -N} wrapping modulo 2^64. */
    private long intervalMb(String key, String interval) {
        String t = skipSpace(interval);
        if (!INTEGER.matcher(t).matches()) {
            throw new ConfigException(
                    key,
                    "CachingAllocator option " + key + ": expected an interval size in MB or '>', got '" + interval
                            + "'");
        }
        BigInteger n = new BigInteger(t);
        if (n.abs().bitLength() > Long.SIZE) {
            throw new ConfigException(
                    key, "CachingAllocator option " + key + ": interval " + interval + " out of range");
        }
        long mb = n.longValue(); // the low 64 bits: strtoul's negation modulo 2^64
        if (Long.bitCount(mb) != 1) {
            throw new ConfigException(
                    key,
                    "For roundups, the intervals have to be power of 2 (option " + key + ", got " + interval + ")");
        }
        return mb;
    }

    private String parseBackend(String key) {
        expect(++i, ":", key);
        String v = value(key);
        return switch (v) {
            case "native" -> "native";
            // hipMallocAsync is ROCm's name for the same backend.
            case "cudaMallocAsync", "hipMallocAsync" -> "cudaMallocAsync";
            default ->
                throw new ConfigException(
                        key,
                        "Unknown allocator backend, options are native and cudaMallocAsync" + " (option " + key
                                + ", got '" + v + "')");
        };
    }

    private boolean parseBoolean(String key) {
        expect(++i, ":", key);
        ++i;
        String v = i < tokens.size() ? tokens.get(i) : null;
        if (!"True".equals(v) && !"False".equals(v)) {
            throw new ConfigException(
                    key, "Expected a single True/False argument for " + key + (v == null ? "" : " (got '" + v + "')"));
        }
        return "True".equals(v);
    }

    private int parsePinnedThreads(String key) {
        int n = intValue(key);
        if (!isPowerOfTwo(n)) {
            throw new ConfigException(
                    key, "Number of register threads has to be power of 2 (option " + key + ", got " + n + ")");
        }
        if (n > PINNED_MAX_REGISTER_THREADS) {
            throw new ConfigException(
                    key,
                    "Number of register threads should be less than or equal to " + PINNED_MAX_REGISTER_THREADS
                            + " (option " + key + ", got " + n + ")");
        }
        return n;
    }

    // ------------------------------------------------------------------------------------------ tokens

    /** ':' then an integer value. */
    private int intValue(String key) {
        expect(++i, ":", key);
        return toInt(key, value(key));
    }

    /** Advances to the value token; PyTorch's "Error, expecting X value" when the string ends. */
    private String value(String key) {
        if (++i >= tokens.size()) {
            throw new ConfigException(key, "Error, expecting " + key + " value");
        }
        return tokens.get(i);
    }

    private static int toInt(String key, String v) {
        String t = skipSpace(v);
        if (!INTEGER.matcher(t).matches()) {
            throw new ConfigException(key, "CachingAllocator option " + key + ": expected an integer, got '" + v + "'");
        }
        try {
            return Integer.parseInt(t);
        } catch (NumberFormatException e) {
            throw new ConfigException(key, "CachingAllocator option " + key + ": value " + v + " out of int range");
        }
    }

    /** {@code v} without the leading white space ({@code isspace}) that stoi, stoul and stod skip. */
    private static String skipSpace(String v) {
        int k = 0;
        while (k < v.length() && " \t\n\u000b\f\r".indexOf(v.charAt(k)) >= 0) {
            k++;
        }
        return v.substring(k);
    }

    private void expect(int at, String token, String key) {
        if (at >= tokens.size() || !token.equals(tokens.get(at))) {
            String found = at >= tokens.size() ? "end of string" : "'" + tokens.get(at) + "'";
            throw new ConfigException(
                    key,
                    "Error parsing CachingAllocator settings, expected " + token + " after " + key + ", found "
                            + found);
        }
    }

    private static boolean isPowerOfTwo(long v) {
        return v > 0 && (v & (v - 1)) == 0;
    }
}
