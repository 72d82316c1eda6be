package io.gpumem.policy;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.TreeSet;
import org.junit.jupiter.api.Test;

/** The stitch allocator's garbage-free structures against the JDK collections they replace, on seeded random ops. */
class StitchStructuresTest {

    @Test
    void freeBlockTreeAgreesWithATreeSet() {
        long seed = System.nanoTime();
        System.out.println("StitchStructuresTest.freeBlockTreeAgreesWithATreeSet seed " + seed);
        Random r = new Random(seed);
        FreeBlockTree tree = new FreeBlockTree();
        TreeSet<StitchBlock> model = new TreeSet<>((a, b) -> a.size != b.size ? Long.compare(a.size, b.size)
                : Long.compare(a.addr, b.addr));
        List<StitchBlock> in = new ArrayList<>();
        long nextAddr = 512;
        for (int op = 0; op < 20_000; op++) {
            int kind = r.nextInt(4);
            if (kind == 0 || in.isEmpty()) {
                StitchBlock b = new StitchBlock(null, nextAddr, 512L * (1 + r.nextInt(64)), 0);
                nextAddr += 512;
                tree.add(b);
                model.add(b);
                in.add(b);
            } else if (kind == 1) {
                StitchBlock b = in.remove(r.nextInt(in.size()));
                tree.remove(b);
                model.remove(b);
            } else if (kind == 3) {
                // a new key, in place when the order allows (as a split or a merge does), else by moving
                StitchBlock b = in.get(r.nextInt(in.size()));
                model.remove(b);
                long size = 512L * (1 + r.nextInt(64));
                long addr = r.nextBoolean() ? b.addr + 512 * (r.nextInt(3) - 1) : nextAddr;
                nextAddr += 512;
                if (model.stream().anyMatch(x -> x.addr == addr)) {
                    model.add(b);
                    continue;
                }
                if (!tree.rekeyInPlace(b, size, addr)) {
                    tree.remove(b);
                    b.size = size;
                    b.addr = addr;
                    tree.add(b);
                }
                model.add(b);
            } else {
                long want = 512L * r.nextInt(70);
                StitchBlock probe = new StitchBlock(null, Long.MIN_VALUE, want, 0);
                assertThat(tree.ceiling(want)).as("seed %d op %d ceiling(%d)", seed, op, want)
                        .isSameAs(model.ceiling(probe));
            }
            assertThat(tree.size()).isEqualTo(model.size());
            if (op % 1000 == 0) {
                assertThat(tree.wellFormed()).as("seed %d op %d", seed, op).isTrue();
            }
        }
        assertThat(tree.wellFormed()).isTrue();
        List<StitchBlock> order = new ArrayList<>();
        tree.addTo(order);
        assertThat(order).containsExactlyElementsOf(model);
    }

    @Test
    void blockTableAgreesWithAHashMap() {
        long seed = System.nanoTime();
        System.out.println("StitchStructuresTest.blockTableAgreesWithAHashMap seed " + seed);
        Random r = new Random(seed);
        BlockTable table = new BlockTable();
        Map<Long, StitchBlock> model = new HashMap<>();
        List<Long> keys = new ArrayList<>();
        for (int op = 0; op < 50_000; op++) {
            int kind = r.nextInt(3);
            if (kind == 0 || keys.isEmpty()) {
                // clustered keys (page-aligned addresses) make long probe runs, which removal must keep intact
                long key = 0x2000_0000_0000L + 512L * r.nextInt(4096);
                StitchBlock b = new StitchBlock(null, key, 512, 0);
                if (model.put(key, b) == null) {
                    keys.add(key);
                }
                table.put(key, b);
            } else if (kind == 1) {
                long key = keys.remove(r.nextInt(keys.size()));
                assertThat(table.remove(key)).isSameAs(model.remove(key));
                assertThat(table.remove(key)).isNull();
            } else {
                long key = 0x2000_0000_0000L + 512L * r.nextInt(4096);
                assertThat(table.get(key)).as("seed %d op %d get", seed, op).isSameAs(model.get(key));
            }
            assertThat(table.size()).isEqualTo(model.size());
        }
        List<StitchBlock> all = new ArrayList<>();
        table.addTo(all);
        assertThat(all).containsExactlyInAnyOrderElementsOf(model.values());
    }
}
