package io.gpumem.events;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.gpumem.alloc.CachingAllocator;
import io.gpumem.config.AllocatorConfig;
import io.gpumem.device.SimulatedDevice;
import io.gpumem.oom.OutOfMemoryException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.TimeUnit;
import jdk.jfr.EventType;
import jdk.jfr.FlightRecorder;
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
        for (Class<? extends jdk.jfr.Event> c : List.of(
                SegmentAllocEvent.class, SegmentFreeEvent.class, AllocRetryEvent.class, OutOfMemoryEvent.class)) {
            assertThat(EventType.getEventType(c).isEnabled())
                    .as(c.getSimpleName())
                    .isFalse();
        }
    }

    /**
     * Without a recording the allocator does not start JFR's event machinery (looking up an event type does, which
     * was a fifth of a short CLI command's CPU time), and a recording started after the allocator's first events
     * still sees the later ones. In a JVM of its own, since the other tests here start recordings.
     */
    @Test
    void noRecordingLeavesJfrAloneAndALaterRecordingStillSeesEvents(@TempDir Path dir) throws Exception {
        Path log = dir.resolve("classes.log");
        Process p = new ProcessBuilder(
                        Path.of(System.getProperty("java.home"), "bin", "java").toString(),
                        "-Xlog:class+load=info:file=" + log,
                        "-cp",
                        System.getProperty("java.class.path"),
                        LateRecording.class.getName(),
                        dir.resolve("late.jfr").toString())
                .redirectErrorStream(true)
                .start();
        String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        assertThat(p.waitFor(60, TimeUnit.SECONDS)).isTrue();
        assertThat(p.exitValue()).as(out).isZero();
        // the child prints the segment allocations its recording saw, after 2 before the recording started
        assertThat(out.strip()).isEqualTo("segment allocs recorded: 1");
        String classes = Files.readString(log);
        String beforeRecording = classes.substring(0, classes.indexOf(LateRecording.RecordingStarts.class.getName()));
        assertThat(beforeRecording)
                .contains("io.gpumem.events.AllocatorEvents")
                .doesNotContain("jdk.jfr.internal.MetadataRepository");
        assertThat(classes).contains("jdk.jfr.internal.MetadataRepository");
    }

    /** The child of the test above: two segments with no recording, then a recording and a third. */
    static final class LateRecording {
        /** Loaded between the two phases, so that the class-load log shows where the recording began. */
        static final class RecordingStarts {}

        public static void main(String[] args) throws Exception {
            SimulatedDevice device =
                    SimulatedDevice.builder().capacity(100 * MIB).build();
            CachingAllocator a = new CachingAllocator(device, AllocatorConfig.defaults());
            a.malloc(30 * MIB, 0);
            a.malloc(30 * MIB, 0);
            if (FlightRecorder.isInitialized()) {
                throw new AssertionError("Flight Recorder initialized without a recording");
            }
            new RecordingStarts();
            Path file = Path.of(args[0]);
            try (Recording r = new Recording()) {
                r.enable("gpumem.SegmentAlloc").withoutThreshold();
                r.start();
                a.malloc(30 * MIB, 0);
                r.stop();
                r.dump(file);
            }
            long allocs = RecordingFile.readAllEvents(file).stream()
                    .filter(e -> e.getEventType().getName().equals("gpumem.SegmentAlloc"))
                    .count();
            System.out.println("segment allocs recorded: " + allocs);
        }
    }

    @Test
    void aRecordingSeesSegmentsRetriesAndTheOom(@TempDir Path dir) throws Exception {
        Path file = dir.resolve("gpumem.jfr");
        try (Recording r = new Recording()) {
            for (String name :
                    List.of("gpumem.SegmentAlloc", "gpumem.SegmentFree", "gpumem.AllocRetry", "gpumem.OutOfMemory")) {
                r.enable(name).withoutThreshold();
            }
            r.start();
            SimulatedDevice device =
                    SimulatedDevice.builder().capacity(100 * MIB).build();
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
        // only this thread's events: a recording sees the whole JVM, where another test's what-if workers may still
        // be finishing a dropped probe on an allocator of their own
        long self = Thread.currentThread().threadId();
        List<RecordedEvent> events = RecordingFile.readAllEvents(file).stream()
                .filter(e -> e.getThread() != null && e.getThread().getJavaThreadId() == self)
                .toList();
        assertThat(events)
                .filteredOn(e -> e.getEventType().getName().equals("gpumem.SegmentAlloc"))
                .hasSize(2)
                .allSatisfy(e -> assertThat(e.getLong("size")).isEqualTo(30 * MIB));
        assertThat(events)
                .filteredOn(e -> e.getEventType().getName().equals("gpumem.SegmentFree"))
                .extracting(e -> e.getLong("size"))
                .contains(30 * MIB);
        assertThat(events)
                .filteredOn(e -> e.getEventType().getName().equals("gpumem.AllocRetry"))
                .hasSize(1);
        RecordedEvent oom = events.stream()
                .filter(e -> e.getEventType().getName().equals("gpumem.OutOfMemory"))
                .findFirst()
                .orElseThrow();
        assertThat(oom.getLong("requested")).isEqualTo(90 * MIB);
        assertThat(oom.getLong("reserved")).isEqualTo(30 * MIB);
    }
}
