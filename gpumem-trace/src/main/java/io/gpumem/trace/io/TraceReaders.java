package io.gpumem.trace.io;

import io.gpumem.script.OpsScript;
import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.util.function.LongConsumer;

/**
 * Entry point for reading any supported trace file: detects the format from the content (a pickle starts
 * with the PROTO opcode 0x80 or a list/dict opcode; CSVs by their header line) and dispatches to the reader.
 *
 * <p>Formats: PyTorch snapshot pickles ({@link PytorchSnapshotReader}), RMM logs ({@link RmmLogReader}),
 * lifetime CSVs ({@link LifetimeCsvReader}), {@code gpumem sim} ops scripts ({@link OpsScriptReader}; recognised
 * by the first word of the first line that is not blank or a comment). Anything else is a {@link TraceFormatException} naming the file.
 */
public final class TraceReaders {

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

    /** Detects the format from the first bytes. */
    public static SourceFormat detect(Path file) {
        String name = file.toString();
        byte[] head = new byte[8192];
        int n;
        try (InputStream in = Files.newInputStream(file)) {
            n = in.readNBytes(head, 0, head.length);
        } catch (NoSuchFileException e) {
            throw new TraceFormatException(name, "", "no such file");
        } catch (IOException e) {
            throw new TraceFormatException(name, "", "cannot read: " + e.getMessage(), e);
        }
        if (n == 0) {
            throw new TraceFormatException(name, "", "empty file");
        }
        int b0 = head[0] & 0xff;
        // PROTO (0x80) for protocol 2+, or protocol 0/1 streams starting with MARK '(' , EMPTY_DICT '}', EMPTY_LIST
        // ']'.
        if (b0 == 0x80 || b0 == '}' || b0 == ']' || b0 == '(') {
            return SourceFormat.PYTORCH_SNAPSHOT;
        }
        // a UTF-8 byte-order mark (spreadsheets write one before a CSV's header) is no part of the text
        int bom = n >= 3 && (head[0] & 0xff) == 0xEF && (head[1] & 0xff) == 0xBB && (head[2] & 0xff) == 0xBF ? 3 : 0;
        String text = new String(head, bom, n - bom, StandardCharsets.ISO_8859_1);
        String first = text.lines()
                .map(String::strip)
                .filter(l -> !l.isEmpty() && !l.startsWith("#"))
                .findFirst()
                .orElse("");
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
        throw new TraceFormatException(
                name,
                "",
                "unknown trace format (expected a PyTorch snapshot pickle, an RMM"
                        + " log with header Thread,Time,Action,Pointer,Size,Stream, a lifetime CSV with header"
                        + " id,lower,upper,size, or a gpumem sim ops script)");
    }
}
