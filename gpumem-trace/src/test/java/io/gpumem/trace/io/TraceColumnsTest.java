package io.gpumem.trace.io;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.gpumem.history.FileKeys;
import io.gpumem.history.Frame;
import io.gpumem.history.TraceAction;
import io.gpumem.history.TraceEntry;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Random;
import org.junit.jupiter.api.Test;

/**
 * The columns' field accessors read what the entry records would hold, and a range of them (a suffix the state
 * after entry n is rebuilt from) keeps the columns' {@link EntryFields} instead of falling back to a record per
 * entry.
 */
class TraceColumnsTest {

    @Test
    void fieldsAndRangesReadWhatWasAppended() {
        long seed = Long.getLong("gpumem.seed", System.nanoTime()); // -Dgpumem.seed=N replays a run
        System.out.println("TraceColumnsTest seed " + seed);
        Random random = new Random(seed);
        List<List<Frame>> stacks =
                List.of(List.of(new Frame("train.py", 10, "forward")), List.of(new Frame("train.py", 20, "backward")));
        TraceAction[] actions = {
            TraceAction.ALLOC, TraceAction.FREE_REQUESTED, TraceAction.FREE_COMPLETED, TraceAction.SEGMENT_ALLOC
        };
        long[] streams = new long[40]; // more streams than the table starts with, the default and -1 among them
        for (int s = 2; s < streams.length; s++) {
            streams[s] = random.nextLong();
        }
        streams[1] = -1;
        TraceColumns columns = new TraceColumns();
        List<TraceEntry> expected = new ArrayList<>();
        // More than one chunk. Values that do not fit a chunk's packed form (far apart, unaligned, negative) come
        // often, rarely (a chunk turns plain after thousands of packed values) or never, in turns.
        int n = (1 << 17) + 1000 + random.nextInt(1000);
        int[] odds = {8, 5_000, Integer.MAX_VALUE};
        for (int i = 0; i < n; i++) {
            int odd = odds[(i / 20_000) % odds.length];
            TraceAction a = actions[random.nextInt(actions.length)];
            long addr = 0x7f00_0000_0000L + 512L * i;
            long size = 512L * (1 + random.nextInt(1 << 20));
            long time = 1_000L * i;
            if (random.nextInt(odd) == 0) {
                switch (random.nextInt(3)) {
                    case 0 -> addr = random.nextBoolean() ? random.nextLong() : random.nextLong() & ~511L;
                    case 1 -> size = 1 + 2 * (long) random.nextInt(1 << 20);
                    default -> time = -1L - random.nextInt(1000);
                }
            }
            long stream = streams[random.nextInt(random.nextInt(odd) == 0 ? streams.length : 3)];
            List<Frame> frames = random.nextBoolean() ? stacks.get(random.nextInt(2)) : null;
            int present = random.nextInt(8) == 0 ? 64 + random.nextInt(64) : random.nextInt(64);
            FileKeys keys = random.nextInt(100) == 0
                    ? FileKeys.of(present, null, null, Map.of("note", "kept"))
                    : FileKeys.of(present);
            long deviceFree = random.nextInt(1 << 30);
            columns.append(a, addr, size, stream, time, frames, deviceFree, keys);
            long kept = keys.has(TraceEntry.DEVICE_FREE) ? deviceFree : -1;
            expected.add(new TraceEntry(a, addr, size, stream, time, frames, kept, keys));
        }
        assertThat(columns).hasSize(n);
        int from = random.nextInt(n / 2);
        int to = from + random.nextInt(n - from);
        List<TraceEntry> range = columns.subList(from, to);
        assertThat(EntryFields.of(range))
                .as("a range keeps the columns' fields")
                .isSameAs(range);
        assertThat(range).hasSize(to - from);
        assertFields(columns, expected, 0);
        for (int i = 0; i < n; i++) {
            assertThat(columns.timeUs(i)).isEqualTo(expected.get(i).timeUs());
        }
        assertFields(range, expected, from);
        List<TraceEntry> inner = range.subList(1, range.size() / 2);
        assertThat(inner).isInstanceOf(EntryFields.class);
        assertFields(inner, expected, from + 1);
        // every range of the columns and of a range is checked: empty ones are allowed, reversed or outside ones not
        assertThat(columns.subList(n, n)).isEmpty();
        assertThat(columns.subList(0, 1)).containsExactly(expected.getFirst());
        assertThat(range.subList(range.size(), range.size())).isEmpty();
        assertThatThrownBy(() -> columns.subList(5, 4)).isInstanceOf(IndexOutOfBoundsException.class);
        assertThatThrownBy(() -> columns.subList(-1, 4)).isInstanceOf(IndexOutOfBoundsException.class);
        assertThatThrownBy(() -> columns.subList(0, n + 1)).isInstanceOf(IndexOutOfBoundsException.class);
        assertThatThrownBy(() -> range.subList(0, range.size() + 1)).isInstanceOf(IndexOutOfBoundsException.class);
        assertThatThrownBy(() -> range.subList(2, 1)).isInstanceOf(IndexOutOfBoundsException.class);
        assertThatThrownBy(() -> range.get(range.size())).isInstanceOf(IndexOutOfBoundsException.class);
        assertThatThrownBy(() -> columns.get(n)).isInstanceOf(IndexOutOfBoundsException.class);
        assertThatThrownBy(() -> columns.get(-1)).isInstanceOf(IndexOutOfBoundsException.class);
    }

    private static void assertFields(List<TraceEntry> view, List<TraceEntry> appended, int offset) {
        EntryFields fields = EntryFields.of(view);
        for (int i = 0; i < view.size(); i++) {
            TraceEntry e = appended.get(offset + i);
            assertThat(view.get(i)).isEqualTo(e);
            assertThat(fields.action(i)).isEqualTo(e.action());
            assertThat(fields.addr(i)).isEqualTo(e.addr());
            assertThat(fields.size(i)).isEqualTo(e.size());
            assertThat(fields.stream(i)).isEqualTo(e.stream());
            assertThat(fields.frames(i)).isEqualTo(e.frames());
        }
    }
}
