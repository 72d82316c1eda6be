package io.gpumem.alloc;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import org.junit.jupiter.api.Test;

class AddressTableTest {

    /**
     * Random puts and removes of segment-aligned and block-aligned addresses, and capacity requests, checked
     * against a HashMap.
     */
    @Test
    void behavesLikeAHashMapOnAlignedAddresses() {
        long seed = System.nanoTime();
        System.out.println("seed=" + seed);
        Random rnd = new Random(seed);
        AddressTable<Void> table = AddressTable.forInts(4);
        Map<Long, Integer> model = new HashMap<>();
        List<Long> keys = new ArrayList<>();
        for (int i = 0; i < 3000; i++) {
            long base = 0x7f20_0000_0000L + ((long) rnd.nextInt(4096) << 21);
            keys.add(rnd.nextBoolean() ? base : base + ((long) rnd.nextInt(4096) << 9));
        }
        for (int step = 0; step < 200_000; step++) {
            long k = keys.get(rnd.nextInt(keys.size()));
            if (rnd.nextInt(1000) == 0) {
                table.ensureCapacity(rnd.nextInt(4096)); // rehashes at random points; changes no mapping
            }
            switch (rnd.nextInt(4)) {
                case 0, 1 -> {
                    int v = rnd.nextInt(1_000_000);
                    Integer old = model.put(k, v);
                    assertThat(table.putInt(k, v, -1)).as("seed " + seed).isEqualTo(old == null ? -1 : old);
                }
                case 2 -> {
                    Integer old = model.remove(k);
                    assertThat(table.removeInt(k, -1)).as("seed " + seed).isEqualTo(old == null ? -1 : old);
                }
                default -> {
                    assertThat(table.containsKey(k)).as("seed " + seed).isEqualTo(model.containsKey(k));
                    assertThat(table.getInt(k, -1)).as("seed " + seed).isEqualTo(model.getOrDefault(k, -1));
                }
            }
            assertThat(table.size()).isEqualTo(model.size());
        }
        for (long k : keys) {
            assertThat(table.getInt(k, -1)).isEqualTo(model.getOrDefault(k, -1));
        }
    }

    @Test
    void aTableHoldsOneKindOfValue() {
        assertThatThrownBy(() -> AddressTable.forInts().get(512)).isInstanceOf(IllegalStateException.class);
        assertThatThrownBy(() -> AddressTable.forObjects().getInt(512, -1)).isInstanceOf(IllegalStateException.class);
    }

    @Test
    void theNullAddressIsRejected() {
        assertThatThrownBy(() -> AddressTable.forInts().putInt(0, 1, -1)).isInstanceOf(IllegalArgumentException.class);
    }
}
