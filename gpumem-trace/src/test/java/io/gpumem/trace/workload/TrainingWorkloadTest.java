package io.gpumem.trace.workload;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.gpumem.engine.RequestStream;
import java.util.BitSet;
import java.util.EnumMap;
import java.util.Map;
import java.util.SplittableRandom;
import java.util.stream.IntStream;
import org.junit.jupiter.api.Test;

class TrainingWorkloadTest {

    static TrainingWorkload small(long seed) {
        return TrainingWorkload.builder()
                .layers(3)
                .hidden(256)
                .heads(4)
                .vocab(1000)
                .batch(2)
                .seqLens(64, 512, 64)
                .steps(5)
                .seed(seed)
                .build();
    }

    /** Walks the ops: every free names a live slot, and what is live at the end is exactly liveAtEnd(). */
    static BitSet checkBalance(TrainingWorkload w) {
        BitSet allocated = new BitSet();
        BitSet freed = new BitSet();
        RequestStream ops = w.stream();
        int steps = 0;
        for (int k = 0; k < ops.length(); k++) {
            int slot = ops.slot(k);
            switch (ops.op(k)) {
                case RequestStream.ALLOC -> {
                    assertThat(allocated.get(slot))
                            .as("slot %d allocated twice", slot)
                            .isFalse();
                    assertThat(ops.size(k)).isPositive();
                    allocated.set(slot);
                }
                case RequestStream.FREE -> {
                    assertThat(allocated.get(slot))
                            .as("free of unknown slot %d", slot)
                            .isTrue();
                    assertThat(freed.get(slot))
                            .as("double free of slot %d", slot)
                            .isFalse();
                    freed.set(slot);
                }
                case RequestStream.STEP -> steps++;
                default -> throw new AssertionError("unexpected op " + ops.op(k) + " at " + k);
            }
        }
        assertThat(steps).isEqualTo(w.settings().steps());
        assertThat(allocated.cardinality()).isEqualTo(ops.allocs());
        BitSet live = (BitSet) allocated.clone();
        live.andNot(freed);
        return live;
    }

    @Test
    void isDeterministicForASeedAndVariesWithIt() {
        long seed = new SplittableRandom().nextLong();
        System.out.println("seed=" + seed);
        TrainingWorkload a = small(seed);
        TrainingWorkload b = small(seed);
        RequestStream sa = a.stream();
        RequestStream sb = b.stream();
        assertThat(sb.length()).isEqualTo(sa.length());
        for (int k = 0; k < sa.length(); k++) {
            assertThat(new long[] {sb.op(k), sb.slot(k), sb.size(k)})
                    .isEqualTo(new long[] {sa.op(k), sa.slot(k), sa.size(k)});
        }
        assertThat(a.seqLens()).isEqualTo(b.seqLens());
        assertThat(java.util.Arrays.stream(a.seqLens()).boxed().toList())
                .allMatch(s -> s >= 64 && s <= 512 && s % 64 == 0);
        // Over 8 different seeds the first step's length cannot always be the same (8 values possible).
        long distinct = java.util.stream.LongStream.range(0, 8)
                .map(s -> small(seed + s).seqLens()[0])
                .distinct()
                .count();
        assertThat(distinct).isGreaterThan(1);
    }

    @Test
    void everyAllocationIsFreedOrLiveAtTheEndAsIntended() {
        TrainingWorkload w = small(7);
        BitSet live = checkBalance(w);
        assertThat(live).isEqualTo(w.liveAtEnd());
        Map<TensorKind, Integer> liveKinds = new EnumMap<>(TensorKind.class);
        long liveBytes = 0;
        RequestStream ops = w.stream();
        for (int k = 0; k < ops.length(); k++) {
            if (ops.op(k) == RequestStream.ALLOC && live.get(ops.slot(k))) {
                liveKinds.merge(w.kind(ops.slot(k)), 1, Integer::sum);
                liveBytes += ops.size(k);
            }
        }
        int params = 1 + 12 * 3 + 3;
        assertThat(liveKinds)
                .containsOnly(Map.entry(TensorKind.WEIGHT, params), Map.entry(TensorKind.OPTIMIZER_STATE, 2 * params));
        // weights at 2 bytes plus two fp32 states: 10 bytes per parameter
        assertThat(liveBytes).isEqualTo(w.parameterCount() * 10);
        assertThat(w.parameterCount()).isEqualTo(2L * 1000 * 256 + 3 * (12L * 256 * 256 + 13 * 256) + 2 * 256);
    }

    @Test
    void keptGradientsStayLiveAndMaterialisedAttentionAddsQuadraticTensors() {
        TrainingWorkload kept = TrainingWorkload.builder()
                .layers(2)
                .hidden(128)
                .heads(2)
                .vocab(100)
                .batch(1)
                .seqSchedule(128, 256)
                .steps(3)
                .keepGradients(true)
                .materializedAttention(true)
                .build();
        BitSet live = checkBalance(kept);
        assertThat(live).isEqualTo(kept.liveAtEnd());
        RequestStream ops = kept.stream();
        long grads = IntStream.range(0, ops.slots())
                .filter(slot -> kept.kind(slot) == TensorKind.GRADIENT)
                .count();
        assertThat(grads).as("gradients allocated once when kept").isEqualTo(1 + 12 * 2 + 3);
        assertThat(kept.seqLens()).containsExactly(128, 256, 128);
        assertThat(IntStream.range(0, ops.length()))
                .anyMatch(k -> ops.op(k) == RequestStream.ALLOC
                        && kept.tensorName(ops.slot(k)).endsWith("attn.probs")
                        && ops.size(k) == 1L * 2 * 256 * 256 * 2);
    }

    @Test
    void peakLiveGrowsWithBatchAndSmallerBatchKeepsTheRest() {
        TrainingWorkload w = small(3);
        TrainingWorkload half = w.withBatch(1);
        assertThat(half.seqLens()).isEqualTo(w.seqLens());
        assertThat(half.parameterCount()).isEqualTo(w.parameterCount());
        assertThat(half.peakLiveBytes()).isLessThan(w.peakLiveBytes());
        assertThat(half.peakLiveBytes()).isGreaterThan(half.parameterCount() * 10);
    }

    @Test
    void rejectsBadParametersNamingThem() {
        assertThatThrownBy(() -> TrainingWorkload.builder().layers(0)).hasMessageContaining("layers must be positive");
        assertThatThrownBy(() -> TrainingWorkload.builder().hidden(100).heads(3).build())
                .hasMessageContaining("hidden 100 is not a multiple of heads 3");
        assertThatThrownBy(() -> TrainingWorkload.builder().seqLens(512, 256, 64))
                .hasMessageContaining("below min");
        assertThatThrownBy(() -> TrainingWorkload.builder().seqLens(65, 127, 64))
                .hasMessageContaining("no multiple of 64");
        assertThatThrownBy(() -> TrainingWorkload.builder().seqSchedule()).hasMessageContaining("empty");
    }

    @Test
    void aModelWhosePeakOfLiveTensorsIsOverTheLargestDeviceIsRefusedNamingItsSettings() {
        // every tensor passes the 1 EiB check (tokens x widest x 8 bytes = 2^60), but 16 layers of saved activations
        // add up to about 2^64 bytes: a wrapped sum read it as 9079913532778086400
        assertThatThrownBy(() -> TrainingWorkload.builder()
                        .layers(16)
                        .hidden(1 << 20)
                        .heads(1)
                        .vocab(1)
                        .batch(1 << 17)
                        .seqSchedule(1 << 18)
                        .steps(1)
                        .build())
                .isInstanceOf(IllegalArgumentException.class)
                .hasMessage("the model is too large to simulate: with hidden 1048576, vocab 1, 16 layers, batch 131072"
                        + " and sequences up to 262144, the tensors live at once would take more than 2^63 - 1 bytes,"
                        + " more than the 2^60 bytes (1 EiB) of the largest device a run models: use fewer layers, a"
                        + " smaller batch, hidden or sequence length");
        // a sum that fits in a long but is over 1 EiB: 2 layers of the same
        assertThatThrownBy(() -> TrainingWorkload.builder()
                        .layers(2)
                        .hidden(1 << 20)
                        .heads(1)
                        .vocab(1)
                        .batch(1 << 17)
                        .seqSchedule(1 << 18)
                        .steps(1)
                        .build())
                .hasMessageContaining(
                        "2 layers, batch 131072 and sequences up to 262144, the tensors live at once" + " would take ")
                .hasMessageContaining(" bytes, more than the 2^60 bytes (1 EiB)");
        // a model of about a PiB at its peak is accepted, its peak the exact sum of the live sizes
        TrainingWorkload fits = TrainingWorkload.builder()
                .layers(2)
                .hidden(1 << 10)
                .heads(1)
                .vocab(1)
                .batch(1 << 17)
                .seqSchedule(1 << 18)
                .steps(1)
                .build();
        assertThat(fits.peakLiveBytes())
                .isEqualTo(fits.stream().peakLiveBytes())
                .isPositive();
    }

    @Test
    void sequenceLengthsAreDrawnUpToIntMax() {
        long seed = new SplittableRandom().nextLong();
        System.out.println("TrainingWorkloadTest seed=" + seed);
        TrainingWorkload w = TrainingWorkload.builder()
                .layers(1)
                .hidden(1)
                .heads(1)
                .vocab(1)
                .batch(1)
                .seqLens(1, Integer.MAX_VALUE, 1)
                .steps(3)
                .seed(seed)
                .build();
        assertThat(w.seqLens()).hasSize(3);
        assertThat(IntStream.of(w.seqLens()).allMatch(len -> len >= 1)).isTrue();
        // the top multiple of a range ending at Integer.MAX_VALUE is drawn: with one multiple it is the only one
        TrainingWorkload top = TrainingWorkload.builder()
                .layers(1)
                .hidden(1)
                .heads(1)
                .vocab(1)
                .batch(1)
                .seqLens(Integer.MAX_VALUE, Integer.MAX_VALUE, 1)
                .steps(2)
                .build();
        assertThat(top.seqLens()).containsExactly(Integer.MAX_VALUE, Integer.MAX_VALUE);
        // the demo's defaults with that range: drawn too (tensors of up to 1.3e10 tokens stay under 1 EiB)
        assertThat(TrainingWorkload.builder()
                        .seqLens(1, Integer.MAX_VALUE, 1)
                        .steps(1)
                        .build()
                        .seqLens()[0])
                .isPositive();
    }

    @Test
    void theOpsCountedBeforeGeneratingAreTheOpsGenerated() {
        for (boolean materialized : new boolean[] {false, true}) {
            for (boolean keep : new boolean[] {false, true}) {
                for (int layers : new int[] {1, 3}) {
                    for (int steps : new int[] {1, 4}) {
                        TrainingWorkload.Builder b = TrainingWorkload.builder()
                                .layers(layers)
                                .hidden(64)
                                .heads(4)
                                .vocab(100)
                                .batch(2)
                                .seqSchedule(32, 64)
                                .steps(steps)
                                .materializedAttention(materialized)
                                .keepGradients(keep);
                        assertThat(b.ops())
                                .as("materialized %s, keep %s, %d layers, %d steps", materialized, keep, layers, steps)
                                .isEqualTo(b.build().stream().length());
                    }
                }
            }
        }
        // 1000 layers x 227 steps generate 20,474,411 ops: over the 20,000,000 limit, refused before generating
        assertThatThrownBy(() -> tiny().layers(1000).steps(227).build())
                .isInstanceOf(IllegalArgumentException.class)
                .hasMessage(
                        "227 steps of 1000 layers would generate 20474411 ops (allocator calls and step marks), over"
                                + " the limit of 20000000 (the ops are generated before the run): use fewer steps or layers");
        assertThat(tiny().layers(1000).steps(221).ops()).isLessThanOrEqualTo(TrainingWorkload.Builder.MAX_OPS);
        // a count past a long is refused too
        assertThatThrownBy(() -> tiny().layers(Integer.MAX_VALUE)
                        .steps(Integer.MAX_VALUE)
                        .build())
                .hasMessageContaining("would generate more than 2^63 - 1 ops");
    }

    private static TrainingWorkload.Builder tiny() {
        return TrainingWorkload.builder().hidden(8).heads(1).vocab(8).batch(1).seqSchedule(8);
    }
}
