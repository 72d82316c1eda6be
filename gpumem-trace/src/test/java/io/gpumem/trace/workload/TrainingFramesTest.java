package io.gpumem.trace.workload;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpumem.engine.RequestStream;
import io.gpumem.engine.RunOutcome;
import io.gpumem.history.Frame;
import io.gpumem.history.TraceAction;
import io.gpumem.history.TraceEntry;
import java.util.List;
import java.util.stream.IntStream;
import org.junit.jupiter.api.Test;

class TrainingFramesTest {
    static TrainingWorkload small() {
        return TrainingWorkload.builder()
                .layers(2)
                .hidden(256)
                .heads(4)
                .vocab(1000)
                .batch(2)
                .seqLens(128, 256, 128)
                .steps(2)
                .seed(3)
                .build();
    }

    /** The ops allocating tensor {@code name}, in order. */
    static List<Integer> allocs(TrainingWorkload w, String name) {
        RequestStream s = w.stream();
        return IntStream.range(0, s.length())
                .filter(k -> s.op(k) == RequestStream.ALLOC
                        && w.tensorName(s.slot(k)).equals(name))
                .boxed()
                .toList();
    }

    /** The stack of the first allocation of tensor {@code name}. */
    static List<Frame> frames(TrainingWorkload w, String name) {
        return w.stream().frames(allocs(w, name).getFirst());
    }

    @Test
    void eachRequestCarriesOpLayerAndPhase() {
        TrainingWorkload w = small();
        List<Frame> qkv = frames(w, "layers.1.attn.qkv.out");
        assertThat(qkv).extracting(Frame::name).containsExactly("attn.qkv.out", "layers.1", "model.forward");
        assertThat(qkv.getFirst().filename()).isEqualTo("gpumem_demo/model.py");
        assertThat(frames(w, "grad.layers.0.mlp.up.out"))
                .extracting(Frame::name)
                .containsExactly("grad mlp.up.out", "layers.0", "loss.backward");
        assertThat(frames(w, "layers.0.attn.qkv.weight.exp_avg_sq"))
                .extracting(Frame::name)
                .containsExactly("exp_avg_sq", "layers.0", "optimizer.step");
        assertThat(frames(w, "embed.weight"))
                .extracting(Frame::name)
                .containsExactly("init_parameters", "embed", "build_model");
        // the same op in another layer shares the innermost frame (one site) but not the layer frame
        List<Frame> qkv0 = frames(w, "layers.0.attn.qkv.out");
        assertThat(qkv0.getFirst()).isEqualTo(qkv.getFirst());
        assertThat(qkv0.get(1)).isNotEqualTo(qkv.get(1));
    }

    @Test
    void identicalStacksAreOneListAndGenerationIsDeterministic() {
        TrainingWorkload a = small();
        TrainingWorkload b = small();
        List<Integer> ln2 = allocs(a, "layers.1.ln2.out");
        assertThat(ln2).as("one per step").hasSize(2);
        assertThat(a.stream().frames(ln2.get(1))).isSameAs(a.stream().frames(ln2.get(0)));
        assertThat(b.stream().length()).isEqualTo(a.stream().length());
        for (int k = 0; k < a.stream().length(); k++) {
            assertThat(b.stream().frames(k)).isEqualTo(a.stream().frames(k));
        }
    }

    @Test
    void runsWithHistoryRecordTheFramesOnEveryAlloc() {
        TrainingWorkload w = small();
        RunOutcome run = new WorkloadWhatIf(w, 1L << 34, 0, false).runWithHistory("");
        List<TraceEntry> trace = run.allocator().snapshot().deviceTraces().getFirst();
        List<TraceEntry> allocs =
                trace.stream().filter(e -> e.action() == TraceAction.ALLOC).toList();
        assertThat(allocs).hasSize(w.stream().allocs());
        assertThat(allocs).allSatisfy(e -> assertThat(e.frames()).hasSizeBetween(2, 3));
        assertThat(allocs.getFirst().frames())
                .extracting(Frame::name)
                .containsExactly("init_parameters", "embed", "build_model");
    }
}
