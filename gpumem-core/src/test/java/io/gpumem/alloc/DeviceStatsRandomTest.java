package io.gpumem.alloc;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.gpumem.stats.StatKind;
import io.gpumem.stats.StatType;
import java.util.Map;
import java.util.SplittableRandom;
import java.util.TreeMap;
import org.junit.jupiter.api.Test;

/**
 * {@link DeviceStats} derives {@code all} and {@code freed} instead of storing them; this test drives it and a
 * direct model of PyTorch's per-type {@code Stat} structs (current, peak, allocated, freed each kept for
 * {@code all} and the pool on every update) with the same seeded random updates and resets, and compares every
 * key of {@code memory_stats()} after each step.
 */
class DeviceStatsRandomTest {

    /** PyTorch's {@code Stat} for every (stat, type) and the two single stats, updated the literal way. */
    private static final class Model {
        final long[][] current = new long[DeviceStats.ARRAY_STATS + 2][3];
        final long[][] peak = new long[DeviceStats.ARRAY_STATS + 2][3];
        final long[][] allocated = new long[DeviceStats.ARRAY_STATS + 2][3];
        final long[][] freed = new long[DeviceStats.ARRAY_STATS + 2][3];

        void updateOne(int row, int type, long delta) {
            current[row][type] += delta;
            peak[row][type] = Math.max(peak[row][type], current[row][type]);
            if (delta > 0) {
                allocated[row][type] += delta;
            } else {
                freed[row][type] -= delta;
            }
        }

        void update(int stat, int pool, long delta) {
            if (delta != 0) {
                updateOne(stat, DeviceStats.ALL, delta);
                updateOne(stat, pool, delta);
            }
        }

        void resetPeak() {
            for (int r = 0; r < current.length; r++) {
                peak[r] = current[r].clone();
            }
        }

        void resetAccumulated() {
            for (int r = 0; r < current.length; r++) {
                allocated[r] = new long[3];
                freed[r] = new long[3];
            }
        }

        Map<String, Long> toMap() {
            TreeMap<String, Long> m = new TreeMap<>();
            for (int stat = 0; stat < DeviceStats.ARRAY_STATS; stat++) {
                for (int type = 0; type < 3; type++) {
                    put(m, StatKind.values()[stat].key() + "." + StatType.values()[type].key(), stat, type);
                }
            }
            put(m, "oversize_allocations", DeviceStats.ARRAY_STATS, 0);
            put(m, "oversize_segments", DeviceStats.ARRAY_STATS + 1, 0);
            return m;
        }

        private void put(Map<String, Long> m, String prefix, int row, int type) {
            m.put(prefix + ".current", current[row][type]);
            m.put(prefix + ".peak", peak[row][type]);
            m.put(prefix + ".allocated", allocated[row][type]);
            m.put(prefix + ".freed", freed[row][type]);
        }
    }

    @Test
    void derivedFiguresMatchPyTorchsPerTypeStats() {
        long seed = new SplittableRandom().nextLong();
        System.out.println("seed=" + seed);
        SplittableRandom rnd = new SplittableRandom(seed);
        DeviceStats stats = new DeviceStats();
        Model model = new Model();
        for (int step = 0; step < 20_000; step++) {
            int op = rnd.nextInt(100);
            int pool = rnd.nextBoolean() ? DeviceStats.SMALL_POOL : DeviceStats.LARGE_POOL;
            int stat = rnd.nextInt(DeviceStats.ARRAY_STATS);
            long amount = rnd.nextLong(1, 1L << 30);
            if (op < 35) {
                stats.increase(stat, pool, amount);
                model.update(stat, pool, amount);
            } else if (op < 65) {
                stats.decrease(stat, pool, amount);
                model.update(stat, pool, -amount);
            } else if (op < 75) {
                long delta = rnd.nextLong(-5, 6);
                stats.update(stat, pool, delta);
                model.update(stat, pool, delta);
            } else if (op < 80) {
                stats.countAllocation(pool, amount, amount - 7);
                model.update(DeviceStats.ALLOCATION, pool, 1);
                model.update(DeviceStats.ALLOCATED_BYTES, pool, amount);
                model.update(DeviceStats.ACTIVE, pool, 1);
                model.update(DeviceStats.ACTIVE_BYTES, pool, amount);
                model.update(DeviceStats.REQUESTED_BYTES, pool, amount - 7);
            } else if (op < 84) {
                stats.countFreeRequested(pool, amount);
                model.update(DeviceStats.ALLOCATION, pool, -1);
                model.update(DeviceStats.ALLOCATED_BYTES, pool, -amount);
            } else if (op < 88) {
                stats.countFreeCompleted(pool, amount, amount - 3);
                model.update(DeviceStats.ACTIVE, pool, -1);
                model.update(DeviceStats.ACTIVE_BYTES, pool, -amount);
                model.update(DeviceStats.REQUESTED_BYTES, pool, -(amount - 3));
            } else if (op < 93) {
                long delta = rnd.nextLong(-3, 4);
                if (rnd.nextBoolean()) {
                    stats.updateOversizeAllocations(delta);
                    if (delta != 0) {
                        model.updateOne(DeviceStats.ARRAY_STATS, 0, delta);
                    }
                } else {
                    stats.updateOversizeSegments(delta);
                    if (delta != 0) {
                        model.updateOne(DeviceStats.ARRAY_STATS + 1, 0, delta);
                    }
                }
            } else if (op < 97) {
                stats.resetPeak();
                model.resetPeak();
            } else {
                stats.resetAccumulated();
                model.resetAccumulated();
            }
            Map<String, Long> got = new TreeMap<>(stats.toMemoryStats(-1).toPyTorchMap());
            got.keySet().removeIf(k -> k.startsWith("num_") || k.equals("max_split_size"));
            assertThat(got).as("step %d (seed %d)", step, seed).isEqualTo(model.toMap());
            for (int t = 0; t < 3; t++) {
                assertThat(stats.current(stat, t)).isEqualTo(model.current[stat][t]);
                assertThat(stats.peak(stat, t)).isEqualTo(model.peak[stat][t]);
                assertThat(stats.allocated(stat, t)).isEqualTo(model.allocated[stat][t]);
                assertThat(stats.freed(stat, t)).isEqualTo(model.freed[stat][t]);
            }
        }
    }

    @Test
    void anUpdateMustNameAPool() {
        DeviceStats stats = new DeviceStats();
        assertThatThrownBy(() -> stats.increase(DeviceStats.SEGMENT, DeviceStats.ALL, 1))
                .isInstanceOf(IllegalArgumentException.class)
                .hasMessageContaining("pool");
        assertThat(stats.current(DeviceStats.SEGMENT, DeviceStats.ALL)).isZero();
    }
}
