package io.gpumem.cuda;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Random;
import java.util.Set;
import org.junit.jupiter.api.Test;

/** {@link HandleSet} against {@link HashSet} over seeded random add/remove/contains sequences. */
class HandleSetTest {

    @Test
    void agreesWithAHashSetUnderRandomOperations() {
        long seed = System.nanoTime();
        System.out.println("seed=" + seed);
        Random random = new Random(seed);
        for (int round = 0; round < 20; round++) {
            HandleSet set = new HandleSet();
            Set<Long> model = new HashSet<>();
            List<Long> universe = new ArrayList<>();
            // Pointer-like values (aligned, clustered) and small counters, which collide in the low bits.
            long base = 0x7f00_0000_0000L + random.nextInt(1 << 20) * 256L;
            for (int i = 0; i < 300; i++) {
                universe.add(random.nextBoolean() ? base + 16L * random.nextInt(4096) : 1 + random.nextInt(500));
            }
            for (int step = 0; step < 5_000; step++) {
                long key = universe.get(random.nextInt(universe.size()));
                switch (random.nextInt(3)) {
                    case 0 -> assertThat(set.add(key)).isEqualTo(model.add(key));
                    case 1 -> assertThat(set.remove(key)).isEqualTo(model.remove(key));
                    default -> assertThat(set.contains(key)).isEqualTo(model.contains(key));
                }
                assertThat(set.size()).isEqualTo(model.size());
            }
            for (long key : universe) {
                assertThat(set.contains(key)).as("key %d", key).isEqualTo(model.contains(key));
            }
        }
    }

    @Test
    void zeroIsNeverAMember() {
        HandleSet set = new HandleSet();
        assertThatThrownBy(() -> set.add(0)).isInstanceOf(IllegalArgumentException.class);
        assertThat(set.contains(0)).isFalse();
        assertThat(set.remove(0)).isFalse();
    }
}
