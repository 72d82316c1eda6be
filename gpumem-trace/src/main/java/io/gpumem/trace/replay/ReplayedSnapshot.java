package io.gpumem.trace.replay;

import io.gpumem.history.BlockInfo;
import io.gpumem.history.FileKeys;
import io.gpumem.history.MemorySnapshot;
import io.gpumem.history.SegmentInfo;
import io.gpumem.history.TraceEntry;
import io.gpumem.trace.io.SourceFormat;
import io.gpumem.trace.io.TraceSnapshot;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * The snapshot a replay writes ({@code replay --snapshot}): the model's end state and the traces it made
 * ({@link ReplayedTrace}), losing nothing the recording had.
 *
 * <p>A model segment equal to the recorded one at its address (same size, stream, pool kind and blocks by
 * address, size, state and requested size) is written as recorded, keys, frames and unknown keys included; in
 * any other segment, blocks equal to a recorded block keep the recorded block, and a segment the model restored
 * from the start state (which has no stack of its own) keeps the recorded segment's frames. Devices that were not
 * replayed (no trace) keep their recorded segments and trace. {@code external_annotations} and unknown top-level
 * keys are the recording's; {@code allocator_settings} are the recording's (absent when it has none) unless the
 * replay ran under another configuration, whose settings the model reports.
 */
final class ReplayedSnapshot {

    private ReplayedSnapshot() {}

    /**
     * @param models        the model's end state per device index ({@code null}: device not replayed)
     * @param traces        the written trace per device index ({@code null}: device not replayed)
     * @param recordedConfig whether the replay ran under the recording's own configuration
     */
    static TraceSnapshot of(
            TraceSnapshot recording,
            List<MemorySnapshot> models,
            List<List<TraceEntry>> traces,
            boolean recordedConfig) {
        List<SegmentInfo> segments = new ArrayList<>();
        List<List<TraceEntry>> deviceTraces = new ArrayList<>();
        Map<String, Object> settings = recordedConfig ? recording.allocatorSettings() : null;
        for (int d = 0; d < recording.deviceTraces().size(); d++) {
            MemorySnapshot model = d < models.size() ? models.get(d) : null;
            if (model == null) {
                segments.addAll(recording.segmentsOf(d));
                deviceTraces.add(recording.traceOf(d));
                continue;
            }
            Map<Long, SegmentInfo> recorded = new HashMap<>();
            for (SegmentInfo s : recording.segmentsOf(d)) {
                recorded.put(s.address(), s);
            }
            for (SegmentInfo s : model.segments()) {
                segments.add(merge(s.onDevice(d), recorded.get(s.address())));
            }
            deviceTraces.add(traces.get(d));
            if (!recordedConfig && settings == null) {
                settings = model.allocatorSettings();
            }
        }
        segments.sort((x, y) -> Long.compareUnsigned(x.address(), y.address()));
        return new TraceSnapshot(
                recording.source() + " (replayed)",
                SourceFormat.GENERATED,
                segments,
                deviceTraces,
                settings,
                recording.externalAnnotations(),
                recording.extra(),
                true);
    }

    private static SegmentInfo merge(SegmentInfo model, SegmentInfo recorded) {
        if (recorded == null) {
            return model;
        }
        Map<Long, BlockInfo> recordedBlocks = new HashMap<>();
        for (BlockInfo b : recorded.blocks()) {
            recordedBlocks.put(b.address(), b);
        }
        List<BlockInfo> blocks = new ArrayList<>(model.blocks().size());
        int same = 0;
        for (BlockInfo b : model.blocks()) {
            BlockInfo r = recordedBlocks.get(b.address());
            if (r != null
                    && r.size() == b.size()
                    && r.state() == b.state()
                    && (!r.has(BlockInfo.REQUESTED_SIZE) || r.requestedSize() == b.requestedSize())) {
                blocks.add(r);
                same++;
            } else {
                blocks.add(b);
            }
        }
        boolean sameSegment = recorded.totalSize() == model.totalSize()
                && recorded.stream() == model.stream()
                && recorded.isSmall() == model.isSmall()
                && same == recorded.blocks().size()
                && same == model.blocks().size();
        if (sameSegment) {
            return recorded;
        }
        boolean ownStack = model.frames() != null && !model.frames().isEmpty();
        return new SegmentInfo(
                model.device(),
                model.address(),
                model.totalSize(),
                model.allocatedSize(),
                model.activeSize(),
                model.requestedSize(),
                model.stream(),
                model.pool(),
                model.expandable(),
                ownStack ? model.frames() : recorded.frames(),
                List.copyOf(blocks),
                model.poolId(),
                FileKeys.of(model.fields()));
    }
}
