package io.gpumem.trace.io;

import io.gpumem.history.FileKeys;
import io.gpumem.history.TraceAction;
import io.gpumem.history.TraceEntry;
import io.gpumem.script.OpsScript;
import io.gpumem.script.ScriptException;
import io.gpumem.script.ScriptOp;
import java.io.BufferedInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * Reads a {@code gpumem sim} ops script (parsed and checked by {@link OpsScript}) as a one-device request
 * trace, so that scripts can be compared under other configurations like recorded traces.
 *
 * <p>Mapping: {@code alloc NAME SIZE [stream=N]} becomes an {@code alloc} entry with a synthetic handle (the
 * alloc's ordinal times 512, so the snapshot is marked {@code addressesRecorded = false}); {@code free NAME}
 * becomes {@code free_requested} + {@code free_completed}; {@code empty_cache} becomes an entry with the
 * action name {@value #EMPTY_CACHE} (unknown to PyTorch, replayed as a user {@code empty_cache()}). The
 * configuration in force at the first alloc ({@link OpsScript#configAt}: the {@code config} lines before it, folded
 * the way {@code gpumem sim} applies them) becomes {@code allocator_settings} (the recorded configuration);
 * the {@code device} line's capacity and held bytes are kept under the top-level keys
 * {@code gpumem_device_capacity} and {@code gpumem_device_held}. Other ops (record_stream, complete_events,
 * set_fraction, reset_peak, summary, stats, snapshot, later config lines) do not change the request stream and
 * are skipped. The logical time of an entry is its script line.
 */
public final class OpsScriptReader {

    /** Action name of an {@code empty_cache} request in the trace model. */
    public static final String EMPTY_CACHE = "empty_cache";

    private final ReadLimits limits;

    public OpsScriptReader() {
        this(ReadLimits.DEFAULT);
    }

    public OpsScriptReader(ReadLimits limits) {
        this.limits = limits;
    }

    public TraceSnapshot read(Path file) {
        String name = file.toString();
        OpsScript script;
        limits.checkedFileSize(file);
        try (InputStream in = new BufferedInputStream(Files.newInputStream(file), 1 << 16)) {
            script = OpsScript.parse(in);
        } catch (NoSuchFileException e) {
            throw new TraceFormatException(name, "", "no such file");
        } catch (IOException e) {
            throw new TraceFormatException(name, "", "cannot read: " + e.getMessage(), e);
        } catch (ScriptException e) {
            throw new TraceFormatException(name, "line " + e.line(), e.detail(), e);
        }
        if (script.ops().size() > limits.maxEntries()) {
            throw new TraceFormatException(name, "", "more than " + limits.maxEntries() + " ops (limit)");
        }
        List<TraceEntry> out = new ArrayList<>();
        Map<String, Long> handles = new HashMap<>();
        Map<String, Long> sizes = new HashMap<>();
        long next = 0;
        FileKeys keys = FileKeys.of(TraceEntry.ADDR | TraceEntry.SIZE | TraceEntry.STREAM | TraceEntry.TIME_US);
        for (ScriptOp op : script.ops()) {
            switch (op) {
                case ScriptOp.Alloc a -> {
                    if (a.size() == 0) {
                        // PyTorch returns a null pointer for zero bytes and records nothing: neither do we.
                        handles.put(a.name(), 0L);
                        sizes.put(a.name(), 0L);
                        continue;
                    }
                    long handle = ++next * 512;
                    handles.put(a.name(), handle);
                    sizes.put(a.name(), a.size());
                    out.add(new TraceEntry(TraceAction.ALLOC, handle, a.size(), a.stream(), a.line(), null, 0, keys));
                }
                case ScriptOp.Free fr -> {
                    long handle = handles.remove(fr.name());
                    long size = sizes.remove(fr.name());
                    if (handle == 0) {
                        continue;
                    }
                    out.add(new TraceEntry(TraceAction.FREE_REQUESTED, handle, size, 0, fr.line(), null, 0, keys));
                    out.add(new TraceEntry(TraceAction.FREE_COMPLETED, handle, size, 0, fr.line(), null, 0, keys));
                }
                case ScriptOp.EmptyCache e ->
                    out.add(new TraceEntry(
                            TraceAction.UNKNOWN,
                            0,
                            0,
                            0,
                            e.line(),
                            null,
                            0,
                            FileKeys.of(TraceEntry.TIME_US, EMPTY_CACHE, null, null)));
                default -> {}
            }
        }
        Map<String, Object> settings = null;
        int firstAlloc = 0;
        while (firstAlloc < script.ops().size() && !(script.ops().get(firstAlloc) instanceof ScriptOp.Alloc)) {
            firstAlloc++;
        }
        if (script.ops().subList(0, firstAlloc).stream().anyMatch(op -> op instanceof ScriptOp.Config)) {
            settings = new LinkedHashMap<>();
            settings.put("PYTORCH_CUDA_ALLOC_CONF", script.configAt(firstAlloc).raw());
        }
        Map<String, Object> extra = new LinkedHashMap<>();
        if (script.device() != null) {
            extra.put("gpumem_device_capacity", script.device().capacity());
            extra.put("gpumem_device_held", script.device().held());
        }
        return new TraceSnapshot(
                name, SourceFormat.OPS_SCRIPT, List.of(), List.of(List.copyOf(out)), settings, null, extra, false);
    }
}
