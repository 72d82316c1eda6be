package io.gpumem.trace.workload;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpumem.engine.RunOutcome;
import io.gpumem.history.Frame;
import io.gpumem.history.TraceAction;
import io.gpumem.history.TraceEntry;
import java.util.List;
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

    static MemoryOp.Alloc alloc(TrainingWorkload w, String name) {
        return w.ops().stream()
                .filter(o -> o instanceof MemoryOp.Alloc a && a.name().equals(name))
                .map(o -> (MemoryOp.Alloc) o)
                .findFirst()
                .orElseThrow();
    }

    @Test
    void eachRequestCarriesOpLayerAndPhase() {
        TrainingWorkload w = small();
        List<Frame> qkv = w.frames(alloc(w, "layers.1.attn.qkv.out"));
        assertThat(qkv).extracting(Frame::name).containsExactly("attn.qkv.out", "layers.1", "model.forward");
        assertThat(qkv.getFirst().filename()).isEqualTo("gpumem_demo/model.py");
        assertThat(w.frames(alloc(w, "grad.layers.0.mlp.up.out")))
                .extracting(Frame::name)
                .containsExactly("grad mlp.up.out", "layers.0", "loss.backward");
        assertThat(w.frames(alloc(w, "layers.0.attn.qkv.weight.exp_avg_sq")))
                .extracting(Frame::name)
                .containsExactly("exp_avg_sq", "layers.0", "optimizer.step");
        assertThat(w.frames(alloc(w, "embed.weight")))
                .extracting(Frame::name)
                .containsExactly("init_parameters", "embed", "build_model");
        // the same op in another layer shares the innermost frame (one site) but not the layer frame
        List<Frame> qkv0 = w.frames(alloc(w, "layers.0.attn.qkv.out"));
        assertThat(qkv0.getFirst()).isEqualTo(qkv.getFirst());
        assertThat(qkv0.get(1)).isNotEqualTo(qkv.get(1));
    }

    @Test
    void identicalStacksAreOneListAndGenerationIsDeterministic() {
        TrainingWorkload a = small();
        TrainingWorkload b = small();
        List<MemoryOp.Alloc> allocs = a.ops().stream()
                .filter(o -> o instanceof MemoryOp.Alloc)
                .map(o -> (MemoryOp.Alloc) o)
                .toList();
        MemoryOp.Alloc step0 = allocs.stream()
                .filter(x -> x.name().equals("layers.1.ln2.out"))
                .findFirst()
                .orElseThrow();
        MemoryOp.Alloc step1 = allocs.stream()
                .filter(x -> x.name().equals("layers.1.ln2.out"))
                .skip(1)
                .findFirst()
                .orElseThrow();
        assertThat(a.frames(step1)).isSameAs(a.frames(step0));
        for (MemoryOp.Alloc x : allocs) {
            assertThat(b.frames(x)).isEqualTo(a.frames(x));
        }
    }

    @Test
    void runsWithHistoryRecordTheFramesOnEveryAlloc() {
        TrainingWorkload w = small();
        RunOutcome run = new WorkloadWhatIf(w, 1L << 34, 0, false).runWithHistory("");
        List<TraceEntry> trace = run.allocator().snapshot().deviceTraces().getFirst();
        List<TraceEntry> allocs =
                trace.stream().filter(e -> e.action() == TraceAction.ALLOC).toList();
        assertThat(allocs).hasSize(w.allocationCount());
        assertThat(allocs).allSatisfy(e -> assertThat(e.frames()).hasSizeBetween(2, 3));
        assertThat(allocs.getFirst().frames())
                .extracting(Frame::name)
                .containsExactly("init_parameters", "embed", "build_model");
    }
}
