package io.gpumem.events;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.gpumem.alloc.CachingAllocator;
import io.gpumem.config.AllocatorConfig;
import io.gpumem.device.SimulatedDevice;
import io.gpumem.oom.OutOfMemoryException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import jdk.jfr.EventType;
import jdk.jfr.Recording;
import jdk.jfr.consumer.RecordedEvent;
import jdk.jfr.consumer.RecordingFile;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** The allocator's JFR events: off unless a recording asks for them, and then one per counted event. */
class AllocatorEventsTest {
    static final long MIB = 1L << 20;

    @Test
    void eventsAreOffWithoutARecording() {
        for (Class<? extends jdk.jfr.Event> c : List.of(SegmentAllocEvent.class, SegmentFreeEvent.class,
                AllocRetryEvent.class, OutOfMemoryEvent.class)) {
            assertThat(EventType.getEventType(c).isEnabled()).as(c.getSimpleName()).isFalse();
        }
    }

    @Test
    void aRecordingSeesSegmentsRetriesAndTheOom(@TempDir Path dir) throws Exception {
        Path file = dir.resolve("gpumem.jfr");
        try (Recording r = new Recording()) {
            for (String name : List.of("gpumem.SegmentAlloc", "gpumem.SegmentFree", "gpumem.AllocRetry", "gpumem.OutOfMemory")) {
                r.enable(name).withoutThreshold();
            }
            r.start();
            SimulatedDevice device = SimulatedDevice.builder().capacity(100 * MIB).build();
            CachingAllocator a = new CachingAllocator(device, AllocatorConfig.defaults());
            long x = a.malloc(30 * MIB, 0);
            long y = a.malloc(30 * MIB, 0);
            a.free(x);
            // 90 MiB fits no cached block nor the 40 MiB the device has left; the retry frees the cached 30 MiB
            // segment, and 70 MiB is still too little
            assertThatThrownBy(() -> a.malloc(90 * MIB, 0)).isInstanceOf(OutOfMemoryException.class);
            a.free(y);
            r.stop();
            r.dump(file);
        }
        List<RecordedEvent> events = RecordingFile.readAllEvents(file);
        assertThat(events).filteredOn(e -> e.getEventType().getName().equals("gpumem.SegmentAlloc"))
                .hasSize(2).allSatisfy(e -> assertThat(e.getLong("size")).isEqualTo(30 * MIB));
        assertThat(events).filteredOn(e -> e.getEventType().getName().equals("gpumem.SegmentFree"))
                .extracting(e -> e.getLong("size")).contains(30 * MIB);
        assertThat(events).filteredOn(e -> e.getEventType().getName().equals("gpumem.AllocRetry")).hasSize(1);
        RecordedEvent oom = events.stream().filter(e -> e.getEventType().getName().equals("gpumem.OutOfMemory"))
                .findFirst().orElseThrow();
        assertThat(oom.getLong("requested")).isEqualTo(90 * MIB);
        assertThat(oom.getLong("reserved")).isEqualTo(30 * MIB);
    }
}
