package io.gpumem.history;

import java.util.List;
import java.util.Map;

/**
 * What {@code torch.cuda.memory._snapshot()} returns (allocator.md §10.2), for one device.
 *
 * @param segments          segments sorted by address
 * @param deviceTraces      trace entries per device index, oldest first (one list for a single allocator)
 * @param allocatorSettings {@code allocator_settings}: {@code PYTORCH_CUDA_ALLOC_CONF} (String),
 *                          {@code max_split_size} (Long, −1 when unset), {@code garbage_collection_threshold}
 *                          (Double), {@code expandable_segments}, {@code release_lock_on_cudamalloc},
 *                          {@code pinned_use_cuda_host_register} (Boolean), {@code pinned_num_register_threads}
 *                          (Long) and {@code roundup_power2_divisions} (a map from "1", "2", ... "32768" to Long)
 */
public record MemorySnapshot(
        List<SegmentInfo> segments, List<List<TraceEntry>> deviceTraces, Map<String, Object> allocatorSettings) {}
