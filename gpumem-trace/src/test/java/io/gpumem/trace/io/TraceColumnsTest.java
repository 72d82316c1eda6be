package io.gpumem.trace.io;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.gpumem.history.FileKeys;
import io.gpumem.history.Frame;
import io.gpumem.history.TraceAction;
import io.gpumem.history.TraceEntry;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import org.junit.jupiter.api.Test;

/**
 * The columns' field accessors read what the entry records would hold, and a range of them (a suffix the state
 * after entry n is rebuilt from) keeps the columns' {@link EntryFields} instead of falling back to a record per
 * entry.
 */
class TraceColumnsTest {

    @Test
    void fieldsAndRangesReadWhatTheRecordsHold() {
        long seed = Long.getLong("gpumem.seed", System.nanoTime()); // -Dgpumem.seed=N replays a run
        System.out.println("TraceColumnsTest seed " + seed);
        Random random = new Random(seed);
        List<List<Frame>> stacks =
                List.of(List.of(new Frame("train.py", 10, "forward")), List.of(new Frame("train.py", 20, "backward")));
        TraceAction[] actions = {
            TraceAction.ALLOC, TraceAction.FREE_REQUESTED, TraceAction.FREE_COMPLETED, TraceAction.SEGMENT_ALLOC
        };
        TraceColumns columns = new TraceColumns();
        List<TraceEntry> appended = new ArrayList<>();
        // more than one chunk, addresses far apart, so both the packed and the plain forms are read
        int n = (1 << 16) + 1000 + random.nextInt(1000);
        for (int i = 0; i < n; i++) {
            TraceAction a = actions[random.nextInt(actions.length)];
            long addr = random.nextInt(8) == 0 ? random.nextLong() & ~511L : 0x7f00_0000_0000L + 512L * i;
            long size = 512L * (1 + random.nextInt(1 << 20));
            long stream = random.nextInt(3);
            List<Frame> frames = random.nextBoolean() ? stacks.get(random.nextInt(2)) : null;
            FileKeys keys = FileKeys.of(0);
            columns.append(a, addr, size, stream, i, frames, -1, keys);
            appended.add(columns.get(i));
        }
        int from = random.nextInt(n / 2);
        int to = from + random.nextInt(n - from);
        List<TraceEntry> range = columns.subList(from, to);
        assertThat(EntryFields.of(range))
                .as("a range keeps the columns' fields")
                .isSameAs(range);
        assertThat(range).hasSize(to - from);
        assertFields(columns, appended, 0);
        assertFields(range, appended, from);
        List<TraceEntry> inner = range.subList(1, range.size() / 2);
        assertThat(inner).isInstanceOf(EntryFields.class);
        assertFields(inner, appended, from + 1);
        assertThatThrownBy(() -> columns.subList(5, 4)).isInstanceOf(IndexOutOfBoundsException.class);
        assertThatThrownBy(() -> range.get(range.size())).isInstanceOf(IndexOutOfBoundsException.class);
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
            assertThat(fields.frames(i)).isSameAs(e.frames());
        }
    }
}
