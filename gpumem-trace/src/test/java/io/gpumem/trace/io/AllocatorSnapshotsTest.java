package io.gpumem.trace.io;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.gpumem.alloc.CachingAllocator;
import io.gpumem.config.AllocatorConfig;
import io.gpumem.device.SimulatedDevice;
import io.gpumem.history.Frame;
import io.gpumem.history.HistoryOptions;
import io.gpumem.history.MemorySnapshot;
import io.gpumem.history.TraceAction;
import io.gpumem.oom.OutOfMemoryException;
import java.io.ByteArrayInputStream;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import org.junit.jupiter.api.Test;

/**
 * The allocator's snapshot and a file share one model: allocator → file → pickle → file → allocator gives back the
 * same snapshot, record for record (the keys each record had included).
 */
class AllocatorSnapshotsTest {

    @Test
    void allocatorSnapshotSurvivesAPickle() {
        for (String conf : new String[] {"", "expandable_segments:True"}) {
            CachingAllocator a =
                    new CachingAllocator(SimulatedDevice.withCapacity(256L << 20), AllocatorConfig.parse(conf));
            a.recordHistory(HistoryOptions.all());
            List<Frame> stack = List.of(new Frame("model.py", 12, "forward"), new Frame("train.py", 3, "step"));
            a.setContextSupplier(() -> stack);
            long[] clock = {1_000};
            a.internals().setClock(() -> clock[0]++);
            long small = a.malloc(4096);
            long large = a.malloc(24L << 20);
            a.malloc(3L << 20);
            a.free(small);
            assertThatThrownBy(() -> a.malloc(1L << 30)).isInstanceOf(OutOfMemoryException.class);
            a.free(large);
            MemorySnapshot original = a.snapshot();
            assertThat(original.deviceTraces().getFirst())
                    .anyMatch(e -> e.action() == TraceAction.OOM)
                    .anyMatch(e -> e.deviceFree() == -1);

            TraceSnapshot file = AllocatorSnapshots.toTraceSnapshot(original, "run");
            byte[] pickle = new PytorchSnapshotWriter().toBytes(file);
            TraceSnapshot read = new PytorchSnapshotReader().read(new ByteArrayInputStream(pickle), "run");
            MemorySnapshot back = AllocatorSnapshots.toMemorySnapshot(read, 0);

            assertThat(back.segments()).as(conf).isEqualTo(original.segments());
            assertThat(back.deviceTraces()).as(conf).isEqualTo(original.deviceTraces());
            assertThat(back.deviceTraces().getFirst())
                    .filteredOn(e -> e.action() == TraceAction.OOM)
                    .singleElement()
                    .matches(e -> e.deviceFree() >= 0);
            assertThat(comparable(back.allocatorSettings()))
                    .as(conf)
                    .isEqualTo(comparable(original.allocatorSettings()));
        }
    }

    /** The unpickler gives small Python ints as Integer and dicts as hash maps: compare keys sorted, ints as long. */
    private static Object comparable(Object value) {
        if (value instanceof Map<?, ?> m) {
            Map<String, Object> sorted = new TreeMap<>();
            m.forEach((k, v) -> sorted.put(String.valueOf(k), comparable(v)));
            return sorted;
        }
        return value instanceof Integer i ? (Object) i.longValue() : value;
    }
}
