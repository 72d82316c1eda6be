package io.gpumem.trace.io;

import io.gpumem.script.OpsScript;
import java.io.IOException;
import java.io.InputStream;
import java.nio.ByteBuffer;
import java.nio.channels.SeekableByteChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.function.LongConsumer;
import org.jspecify.annotations.Nullable;

/**
 * Entry point for reading any supported trace file: detects the format from the content (a pickle starts
 * with the PROTO opcode 0x80, or with a mark/list/dict opcode and ends with STOP; CSVs by their header line) and
 * dispatches to the reader.
 *
 * <p>Formats: PyTorch snapshot pickles ({@link PytorchSnapshotReader}), RMM logs ({@link RmmLogReader}),
 * lifetime CSVs ({@link LifetimeCsvReader}), {@code gpumem sim} ops scripts ({@link OpsScriptReader}; recognised
 * by the first word of the first line that is not blank or a comment, or by a head of only such lines: see
 * {@link #detect}). Anything else is a {@link TraceFormatException} naming the file.
 */
public final class TraceReaders {

    /**
     * The most bytes of blank and comment lines that format detection reads through looking for a file's first
     * line: far more than any real header comment, and a bound on what detection reads of a file that is
     * something else.
     */
    static final int COMMENT_HEAD_LIMIT = 1 << 20;

    /** What detection reads first: enough for a pickle's first byte and any ordinary first line. */
    private static final int FIRST_READ = 8192;

    private TraceReaders() {}

    /** Reads a trace file of any supported format with the default limits. */
    public static TraceSnapshot read(Path file) {
        return read(file, ReadLimits.DEFAULT);
    }

    /** Reads a trace file of any supported format. @throws TraceFormatException on any problem */
    public static TraceSnapshot read(Path file, ReadLimits limits) {
        return read(file, limits, bytes -> {});
    }

    /**
     * Reads a trace file of any supported format, telling {@code bytesRead} the bytes read so far as a snapshot
     * pickle (the format of large files) is read; the other readers do not report.
     *
     * @throws TraceFormatException on any problem
     */
    public static TraceSnapshot read(Path file, ReadLimits limits, LongConsumer bytesRead) {
        SourceFormat format = detect(file);
        return switch (format) {
            case PYTORCH_SNAPSHOT, PYTORCH_SEGMENT_LIST -> new PytorchSnapshotReader(limits).read(file, bytesRead);
            case RMM_LOG -> new RmmLogReader(limits).read(file);
            case LIFETIME_CSV -> new LifetimeCsvReader(limits).read(file);
            case OPS_SCRIPT -> new OpsScriptReader(limits).read(file);
            default -> throw new TraceFormatException(file.toString(), "", "unsupported format " + format);
        };
    }

    /**
     * Detects the format from the first bytes, and for text from its first line that is not blank or a comment.
     * Detection reads past blank and comment lines (a script may open with a long commented header) up to
     * {@link #COMMENT_HEAD_LIMIT} bytes; a text file whose head is only such lines and goes on past it is an ops
     * script, the one text format that allows comments anywhere, so it reads the way {@code gpumem sim} reads it
     * (and its parser names the line that is wrong if it is not one). A file of nothing but such lines holds no
     * trace of any format.
     */
    public static SourceFormat detect(Path file) {
        String name = file.toString();
        String first;
        int b0;
        try (InputStream in = Files.newInputStream(file)) {
            byte[] head = new byte[FIRST_READ];
            int n = in.readNBytes(head, 0, head.length);
            if (n == 0) {
                throw new TraceFormatException(name, "", "empty file");
            }
            b0 = head[0] & 0xff;
            // PROTO (0x80) for protocol 2+. Protocol 0/1 streams start with MARK '(', EMPTY_DICT '}' or EMPTY_LIST
            // ']', which are also ordinary first characters of text (a CSV or a log), so those count as a pickle
            // only when the file also ends as a pickle does, with STOP '.'; other text is detected below.
            if (b0 == 0x80 || (PROTOCOL_0_1_STARTS.indexOf(b0) >= 0 && endsWithStop(file))) {
                return SourceFormat.PYTORCH_SNAPSHOT;
            }
            first = firstContentLine(in, head, n);
        } catch (NoSuchFileException e) {
            throw new TraceFormatException(name, "", "no such file");
        } catch (IOException e) {
            throw new TraceFormatException(name, "", "cannot read: " + e.getMessage(), e);
        }
        if (first == null) {
            return SourceFormat.OPS_SCRIPT;
        }
        if (first.isEmpty()) {
            throw new TraceFormatException(name, "", "no trace in it: only blank lines and comments");
        }
        String[] fields = first.split(",", -1);
        for (int i = 0; i < fields.length; i++) {
            fields[i] = fields[i].strip();
        }
        if (CsvLines.headerMatches(fields, RmmLogReader.HEADER)) {
            return SourceFormat.RMM_LOG;
        }
        if (CsvLines.headerMatches(fields, LifetimeCsvReader.HEADER)
                || CsvLines.headerMatches(fields, LifetimeCsvReader.PLAN_HEADER)) {
            return SourceFormat.LIFETIME_CSV;
        }
        String verb = first.split("[ \t#]", 2)[0];
        if (OpsScript.VERBS.contains(verb)) {
            return SourceFormat.OPS_SCRIPT;
        }
        String pickleLike = PROTOCOL_0_1_STARTS.indexOf(b0) >= 0
                ? ": it starts with '" + (char) b0 + "' as a protocol 0/1 pickle may, but does not end with a pickle's"
                        + " STOP opcode '.'"
                : "";
        throw new TraceFormatException(
                name,
                "",
                "unknown trace format" + pickleLike + " (expected a PyTorch snapshot pickle, an RMM"
                        + " log with header Thread,Time,Action,Pointer,Size,Stream, a lifetime CSV with header"
                        + " id,lower,upper,size, or a gpumem sim ops script)");
    }

    /** The first bytes a protocol 0 or 1 pickle may start with: MARK, EMPTY_DICT, EMPTY_LIST. */
    private static final String PROTOCOL_0_1_STARTS = "(}]";

    /**
     * Whether the file's last byte, after any ASCII white space, is a pickle's STOP opcode {@code '.'}: how a
     * protocol 0/1 pickle ends (Python ignores what follows STOP, such as a newline an editor added).
     */
    private static boolean endsWithStop(Path file) throws IOException {
        try (SeekableByteChannel ch = Files.newByteChannel(file)) {
            long size = ch.size();
            ByteBuffer tail = ByteBuffer.allocate((int) Math.min(size, 64));
            ch.position(size - tail.capacity());
            while (tail.hasRemaining() && ch.read(tail) >= 0) {
                // reads the last bytes
            }
            for (int k = tail.position() - 1; k >= 0; k--) {
                byte c = tail.get(k);
                if (c == '.') {
                    return true;
                }
                if (c != ' ' && c != '\n' && c != '\r' && c != '\t') {
                    return false;
                }
            }
            return false;
        }
    }

    /**
     * The first line that is not blank or a comment ({@code #}), stripped, of a file whose first {@code n} bytes
     * are in {@code head} and the rest in {@code in}; empty when every line of the file is blank or a comment, null
     * when every line up to {@link #COMMENT_HEAD_LIMIT} bytes is and the file goes on. Bytes are read as ISO-8859-1: the formats' keywords
     * are ASCII, and a byte that is not UTF-8 is the chosen reader's to report, with its line. Line ends are
     * {@code \n}, {@code \r\n} or a lone {@code \r}, as every reader splits them.
     */
    private static @Nullable String firstContentLine(InputStream in, byte[] head, int n) throws IOException {
        // a UTF-8 byte-order mark (spreadsheets write one before a CSV's header) is no part of the text
        int pos = n >= 3 && (head[0] & 0xff) == 0xEF && (head[1] & 0xff) == 0xBB && (head[2] & 0xff) == 0xBF ? 3 : 0;
        boolean atEnd = n < head.length;
        while (true) {
            int end = pos;
            while (end < n && head[end] != '\n' && head[end] != '\r') {
                end++;
            }
            if (end == n && !atEnd) {
                if (n >= COMMENT_HEAD_LIMIT) {
                    return null;
                }
                head = Arrays.copyOf(head, Math.min(2 * head.length, COMMENT_HEAD_LIMIT));
                n += in.readNBytes(head, n, head.length - n);
                atEnd = n < head.length;
                continue;
            }
            String line = new String(head, pos, end - pos, StandardCharsets.ISO_8859_1).strip();
            if (!line.isEmpty() && !line.startsWith("#")) {
                return line;
            }
            if (end == n) {
                return "";
            }
            pos = end + 1;
        }
    }
}
