package io.gpumem.trace.workload;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.gpumem.engine.RequestStream;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import org.junit.jupiter.api.Test;

/**
 * Every tensor of a small generated training job has the byte size its shape gives, checked against a table of
 * transformer shapes written out here by hand (batch b, sequence s, tokens t = b·s, hidden h, MLP width f, vocabulary
 * v, heads n, element bytes d, optimizer-state bytes o): a weight and its gradient are its elements times d, an
 * AdamW state or update its elements times o, and each activation is the shape autograd keeps for it. The dimensions
 * are small and pairwise distinct, so a size computed from the wrong dimension, or divided where it should be
 * multiplied, shows. Also the size limits the builder checks before generating, at their edges.
 */
class TrainingWorkloadShapesTest {

    private static final int B = 2;
    private static final int H = 6;
    private static final int F_MULT = 5;
    private static final int F = H * F_MULT;
    private static final int V = 7;
    private static final int N = 3;
    private static final int D = 2;
    private static final int O = 4;

    private static TrainingWorkload.Builder tiny() {
        return TrainingWorkload.builder()
                .layers(2)
                .hidden(H)
                .heads(N)
                .ffnMultiplier(F_MULT)
                .vocab(V)
                .batch(B)
                .dtypeBytes(D)
                .optimizerStateBytes(O)
                .seqSchedule(5, 3, 11)
                .steps(3);
    }

    /** Elements of each parameter, by name within a layer ("" prefix for the model's own). */
    private static long parameterElements(String name) {
        String n = name.replaceFirst("^layers\\.\\d+\\.", "");
        return switch (n) {
            case "embed.weight", "lm_head.weight" -> (long) V * H;
            case "ln1.weight", "ln1.bias", "ln2.weight", "ln2.bias", "norm.weight", "norm.bias" -> H;
            case "attn.qkv.weight" -> 3L * H * H;
            case "attn.qkv.bias" -> 3L * H;
            case "attn.out.weight" -> (long) H * H;
            case "attn.out.bias", "mlp.down.bias" -> H;
            case "mlp.up.weight", "mlp.down.weight" -> (long) F * H;
            case "mlp.up.bias" -> F;
            default -> throw new AssertionError("not a parameter: " + name);
        };
    }

    /** Bytes of the tensor called {@code name} in a step of sequence length {@code s}. */
    private static long expectedBytes(String name, TensorKind kind, int s) {
        long t = (long) B * s;
        switch (kind) {
            case WEIGHT -> {
                return parameterElements(name) * D;
            }
            case GRADIENT -> {
                return parameterElements(name.substring(0, name.length() - ".grad".length())) * D;
            }
            case OPTIMIZER_STATE -> {
                return parameterElements(name.replaceFirst("\\.exp_avg(_sq)?$", "")) * O;
            }
            default -> {}
        }
        if (name.endsWith(".adam_update")) {
            return parameterElements(name.substring(0, name.length() - ".adam_update".length())) * O;
        }
        String n = name.replaceFirst("^(grad\\.)?layers\\.\\d+\\.", "").replaceFirst("^grad\\.", "");
        return switch (n) {
            case "input_ids", "ln1.stats", "ln2.stats", "norm.stats" -> t * 8;
            case "embed.out",
                    "ln1.out",
                    "attn.ctx",
                    "attn.out.out",
                    "resid0",
                    "resid1",
                    "resid2",
                    "ln2.out",
                    "mlp.down.out",
                    "norm.out",
                    "resid" -> t * H * D;
            case "attn.qkv.out" -> t * 3 * H * D;
            case "attn.lse" -> (long) B * N * s * 4;
            case "attn.scores", "attn.probs" -> (long) B * N * s * s * D;
            case "mlp.up.out", "mlp.act.out" -> t * F * D;
            case "lm_head.out" -> t * V * D;
            case "loss.log_softmax" -> t * V * 4;
            case "loss" -> 4;
            default -> throw new AssertionError("a tensor the table does not know: " + name);
        };
    }

    /** Checks every allocation's size against the table; returns the bytes allocated per kind, per step. */
    private static List<Map<TensorKind, Long>> checkShapes(TrainingWorkload w) {
        RequestStream ops = w.stream();
        int[] seq = w.seqLens();
        List<Map<TensorKind, Long>> perStep = new ArrayList<>();
        Map<TensorKind, Long> setup = new TreeMap<>();
        Map<TensorKind, Long> current = setup;
        int step = -1;
        for (int k = 0; k < ops.length(); k++) {
            if (ops.op(k) == RequestStream.STEP) {
                step++;
                current = new TreeMap<>();
                perStep.add(current);
                continue;
            }
            if (ops.op(k) != RequestStream.ALLOC) {
                continue;
            }
            int slot = ops.slot(k);
            String name = w.tensorName(slot);
            TensorKind kind = w.kind(slot);
            long want = expectedBytes(name, kind, step < 0 ? 0 : seq[step]);
            assertThat(ops.size(k)).as("%s (%s) in step %d", name, kind, step).isEqualTo(want);
            current.merge(kind, ops.size(k), Long::sum);
        }
        perStep.addFirst(setup);
        return perStep;
    }

    @Test
    void everyTensorHasTheSizeOfItsShape() {
        TrainingWorkload w = tiny().build();
        assertThat(w.seqLens()).containsExactly(5, 3, 11);
        long perLayer = 2L * H + 3L * H * H + 3L * H + (long) H * H + H + 2L * H + 2L * F * H + F + H;
        long parameters = 2L * V * H + 2 * perLayer + 2L * H;
        assertThat(w.parameterCount()).isEqualTo(parameters);

        List<Map<TensorKind, Long>> bytes = checkShapes(w);
        assertThat(bytes.getFirst()).as("the set-up holds only the weights").containsOnlyKeys(TensorKind.WEIGHT);
        assertThat(bytes.getFirst().get(TensorKind.WEIGHT)).isEqualTo(parameters * D);
        assertThat(bytes.get(1).get(TensorKind.OPTIMIZER_STATE))
                .as("two AdamW states per parameter, made in the first step only")
                .isEqualTo(2 * parameters * O);
        assertThat(bytes.get(2)).doesNotContainKey(TensorKind.OPTIMIZER_STATE);
        for (int s = 1; s <= 3; s++) {
            assertThat(bytes.get(s).get(TensorKind.GRADIENT))
                    .as("every gradient made again each step (set_to_none)")
                    .isEqualTo(parameters * D);
            int seq = w.seqLens()[s - 1];
            long t = (long) B * seq;
            // a layer saves ln1, attn.ctx, resid1, ln2 and resid2 (t·h·d each), two norm statistics, the QKV
            // projection, the attention's log-sum-exp and the MLP's up and activation outputs
            long savedPerLayer = 5 * t * H * D + 2 * t * 8 + t * 3 * H * D + (long) B * N * seq * 4 + 2 * t * F * D;
            // the embedding output, two layers, the final norm and its statistics, the logits and the log-softmax
            long activations = t * H * D + 2 * savedPerLayer + t * H * D + t * 8 + t * V * D + t * V * 4;
            assertThat(bytes.get(s).get(TensorKind.ACTIVATION))
                    .as("step %d's saved activations", s)
                    .isEqualTo(activations);
            assertThat(bytes.get(s).get(TensorKind.INPUT)).isEqualTo(t * 8);
        }
    }

    @Test
    void materialisedAttentionAndKeptGradientsKeepTheirShapes() {
        TrainingWorkload w =
                tiny().materializedAttention(true).keepGradients(true).build();
        List<Map<TensorKind, Long>> bytes = checkShapes(w);
        assertThat(bytes.get(1).get(TensorKind.GRADIENT)).isEqualTo(w.parameterCount() * D);
        assertThat(bytes.get(2)).as("kept gradients are not made again").doesNotContainKey(TensorKind.GRADIENT);
        long probs = 0;
        for (int k = 0; k < w.stream().length(); k++) {
            if (w.stream().op(k) == RequestStream.ALLOC
                    && w.tensorName(w.stream().slot(k)).endsWith("attn.probs")) {
                probs++;
            }
        }
        assertThat(probs).as("one saved probability tensor per layer and step").isEqualTo(2 * 3);
    }

    @Test
    void theSizeLimitsHoldAtTheirEdges() {
        // The LM head's weight in 8-byte elements (the checker's widest element) is the largest tensor here.
        int vocab = 1 << 20;
        int hidden = 1 << 19; // v·h·8 = 2^42 bytes: far under 1 EiB
        TrainingWorkload big = TrainingWorkload.builder()
                .layers(1)
                .heads(1)
                .hidden(hidden)
                .vocab(vocab)
                .batch(1)
                .seqSchedule(1)
                .steps(1)
                .build();
        assertThat(big.parameterCount()).isGreaterThan(2L * vocab * hidden);
        // 2^60 bytes is the tensor limit, checked on the weight matrices' parameters in 8-byte elements (biases and
        // norms are left out of the check): with h = 2^26, two layers of 12·h² and a vocabulary of 2^28 those are
        // exactly 2·2^28·2^26 + 2·12·2^52 = 2^57. That passes the tensor check, but weights, gradients (2 bytes each)
        // and AdamW's two fp32 states of 2^57 parameters are live at once after step 1: 12 bytes each, over 1 EiB,
        // so the peak check refuses the model
        TrainingWorkload.Builder atLimit = TrainingWorkload.builder()
                .layers(2)
                .heads(1)
                .hidden(1 << 26)
                .vocab(1 << 28)
                .batch(1)
                .seqSchedule(1)
                .steps(1);
        assertThatThrownBy(atLimit::build)
                .isInstanceOf(IllegalArgumentException.class)
                .hasMessageContaining("vocab " + (1 << 28) + ", 2 layers")
                .hasMessageContaining("the tensors live at once would take ")
                .hasMessageNotContaining("a tensor or the parameters");
        assertThatThrownBy(() -> atLimit.vocab((1 << 28) + 1).build())
                .isInstanceOf(IllegalArgumentException.class)
                .hasMessageContaining("more than 1 EiB")
                .hasMessageContaining("vocab " + ((1 << 28) + 1));
        assertThatThrownBy(() ->
                        TrainingWorkload.builder().layers(1000).steps(1000).build())
                .isInstanceOf(IllegalArgumentException.class)
                .hasMessageContaining("over the limit of " + TrainingWorkload.Builder.MAX_OPS);
    }
}
