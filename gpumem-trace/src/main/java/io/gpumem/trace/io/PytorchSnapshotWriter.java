package io.gpumem.trace.io;

import io.gpumem.history.BlockHistory;
import io.gpumem.history.BlockInfo;
import io.gpumem.history.Frame;
import io.gpumem.history.SegmentInfo;
import io.gpumem.history.TraceEntry;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.OutputStream;
import java.io.UncheckedIOException;
import java.math.BigInteger;
import java.nio.file.Path;
import java.util.AbstractList;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.IdentityHashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * Writes a {@link TraceSnapshot} as a PyTorch memory-snapshot pickle in the current format (allocator.md §10), the
 * file {@code torch.cuda.memory._dump_snapshot} would write, so that {@code _memory_viz.py} and
 * pytorch.org/memory_viz open it.
 *
 * <p>Keys are written in PyTorch's order; optional fields are written exactly when the model says the
 * source had them ({@code fields} bits, {@code null} frames), and unknown keys kept by a reader are written
 * back, so read → write → read is the identity. Frame lists shared in the model are shared in the pickle, and
 * equal frames and strings are written once ({@link PickleEncoder} memoizes them). The file is written to a temporary
 * sibling and moved into place, so a failure never leaves a half-written snapshot.
 */
public final class PytorchSnapshotWriter {

    /**
     * Writes {@code snapshot} to {@code file}, replacing it atomically ({@link OutputFiles}).
     *
     * @throws IllegalArgumentException naming the file when a value cannot be pickled (nested too deeply)
     */
    public void write(TraceSnapshot snapshot, Path file) throws IOException {
        try {
            OutputFiles.replace(file, out -> write(snapshot, out));
        } catch (IllegalArgumentException e) {
            throw new IllegalArgumentException(file + ": cannot write the snapshot: " + e.getMessage(), e);
        }
    }

    /** Writes the pickle to a stream (not closed). */
    public void write(TraceSnapshot snapshot, OutputStream out) throws IOException {
        new PickleEncoder(out).dump(toPickleTree(snapshot));
        out.flush();
    }

    /** Encodes to bytes. */
    public byte[] toBytes(TraceSnapshot snapshot) {
        ByteArrayOutputStream bytes = new ByteArrayOutputStream();
        try {
            new PickleEncoder(bytes).dump(toPickleTree(snapshot));
            return bytes.toByteArray();
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    /** The dict PyTorch's {@code _snapshot()} returns, as Java maps, lists, tuples and numbers. */
    static Map<String, Object> toPickleTree(TraceSnapshot s) {
        FrameEncoder frames = new FrameEncoder();
        Map<String, Object> top = new LinkedHashMap<>();
        List<Object> segments = new ArrayList<>(s.segments().size());
        for (SegmentInfo seg : s.segments()) {
            segments.add(segment(seg, frames));
        }
        top.put("segments", segments);
        List<Object> traces = new ArrayList<>(s.deviceTraces().size());
        for (List<TraceEntry> trace : s.deviceTraces()) {
            traces.add(new EntryDicts(trace, frames));
        }
        top.put("device_traces", traces);
        if (s.allocatorSettings() != null) {
            top.put("allocator_settings", new LinkedHashMap<>(s.allocatorSettings()));
        }
        if (s.externalAnnotations() != null) {
            List<Object> ann = new ArrayList<>();
            for (Map<String, Object> a : s.externalAnnotations()) {
                ann.add(new LinkedHashMap<>(a));
            }
            top.put("external_annotations", ann);
        }
        top.putAll(s.extra());
        return top;
    }

    private static Map<String, Object> segment(SegmentInfo seg, FrameEncoder frames) {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("device", (long) seg.device());
        m.put("address", seg.address());
        m.put("total_size", seg.totalSize());
        m.put("allocated_size", seg.allocatedSize());
        m.put("active_size", seg.activeSize());
        if (seg.has(SegmentInfo.REQUESTED_SIZE)) {
            m.put("requested_size", seg.requestedSize());
        }
        m.put("stream", seg.stream());
        m.put("segment_type", seg.segmentType());
        if (seg.has(SegmentInfo.POOL_ID)) {
            m.put(
                    "segment_pool_id",
                    new Object[] {seg.poolId().first(), seg.poolId().second()});
        }
        if (seg.has(SegmentInfo.EXPANDABLE)) {
            m.put("is_expandable", seg.expandable());
        }
        if (seg.frames() != null) {
            m.put("frames", frames.encode(seg.frames()));
        } else if (seg.keys().has(SegmentInfo.FRAMES_NONE)) {
            m.put("frames", null);
        }
        List<Object> blocks = new ArrayList<>(seg.blocks().size());
        for (BlockInfo b : seg.blocks()) {
            blocks.add(block(b, frames));
        }
        m.put("blocks", blocks);
        m.putAll(seg.extra());
        return m;
    }

    private static Map<String, Object> block(BlockInfo b, FrameEncoder frames) {
        Map<String, Object> m = new LinkedHashMap<>();
        if (b.has(BlockInfo.ADDRESS)) {
            m.put("address", b.address());
        }
        m.put("size", b.size());
        if (b.has(BlockInfo.REQUESTED_SIZE)) {
            m.put("requested_size", b.requestedSize());
        }
        m.put("state", b.stateName());
        if (b.frames() != null) {
            m.put("frames", frames.encode(b.frames()));
        } else if (b.keys().has(BlockInfo.FRAMES_NONE)) {
            m.put("frames", null);
        }
        if (b.history() != null) {
            List<Object> h = new ArrayList<>();
            for (BlockHistory e : b.history()) {
                Map<String, Object> hm = new LinkedHashMap<>();
                hm.put("addr", e.addr());
                hm.put("real_size", e.realSize());
                if (e.frames() != null) {
                    hm.put("frames", frames.encode(e.frames()));
                }
                h.add(hm);
            }
            m.put("history", h);
        }
        m.putAll(b.extra());
        return m;
    }

    /**
     * An entry's keys in PyTorch's order: {@code action}, then {@code addr} or (oom) {@code device_free},
     * {@code size}, {@code stream}, {@code time_us}, {@code compile_context}, {@code user_metadata}, other keys,
     * and {@code frames} last, so that {@code _memory_viz.py trace}, which prints entries it does not interpret
     * as Python dicts, prints a replayed entry exactly as the recorded one.
     */
    private static Map<String, Object> entry(TraceEntry e, FrameEncoder frames) {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("action", e.actionName());
        if (e.has(TraceEntry.ADDR)) {
            m.put("addr", e.addr());
        }
        if (e.has(TraceEntry.DEVICE_FREE)) {
            m.put("device_free", e.deviceFree());
        }
        if (e.has(TraceEntry.SIZE)) {
            m.put("size", e.size());
        }
        if (e.has(TraceEntry.STREAM)) {
            // An entry's stream is never negative (the reader refuses one): a negative long is a handle past 2^63
            // that the reader took bit for bit, written back as the unsigned int it was.
            long stream = e.stream();
            m.put("stream", stream >= 0 ? (Object) stream : new BigInteger(Long.toUnsignedString(stream)));
        }
        if (e.has(TraceEntry.TIME_US)) {
            m.put("time_us", e.timeUs());
        }
        for (String known : ENTRY_EXTRA_ORDER) {
            if (e.extra().containsKey(known)) {
                m.put(known, e.extra().get(known));
            }
        }
        m.putAll(e.extra());
        if (e.frames() != null) {
            m.put("frames", frames.encode(e.frames()));
        } else if (e.has(TraceEntry.FRAMES_NONE)) {
            m.put("frames", null); // None, as the file had it: _memory_viz.py prints it, and reads it otherwise than []
        }
        return m;
    }

    /** Keys PyTorch writes between {@code time_us} and {@code frames}, in its order. */
    private static final List<String> ENTRY_EXTRA_ORDER = List.of("compile_context", "user_metadata");

    /**
     * A device trace as the encoder writes it: each entry's dict is made when the encoder reaches it and dropped
     * once written ({@link PickleEncoder.FreshItems}), so writing holds no dict per entry. The frame lists are
     * encoded in the same order as if the dicts were made up front, so the file is byte for byte the same.
     */
    private static final class EntryDicts extends AbstractList<Object> implements PickleEncoder.FreshItems {
        private final List<TraceEntry> trace;
        private final FrameEncoder frames;

        EntryDicts(List<TraceEntry> trace, FrameEncoder frames) {
            this.trace = trace;
            this.frames = frames;
        }

        @Override
        public Object get(int index) {
            return entry(trace.get(index), frames);
        }

        @Override
        public int size() {
            return trace.size();
        }
    }

    /** Encodes each distinct frame list once, so the pickle memo shares it like PyTorch does. */
    private static final class FrameEncoder {
        private final IdentityHashMap<List<Frame>, List<Object>> encoded = new IdentityHashMap<>();
        private final HashMap<Frame, Map<String, Object>> frameDicts = new HashMap<>();

        List<Object> encode(List<Frame> frames) {
            List<Object> out = encoded.get(frames);
            if (out == null) {
                out = new ArrayList<>(frames.size());
                for (Frame f : frames) {
                    out.add(frameDicts.computeIfAbsent(f, k -> {
                        Map<String, Object> m = new LinkedHashMap<>();
                        m.put("name", k.name()); // PyTorch's key order
                        m.put("filename", k.filename());
                        m.put("line", k.line());
                        return m;
                    }));
                }
                encoded.put(frames, out);
            }
            return out;
        }
    }
}
