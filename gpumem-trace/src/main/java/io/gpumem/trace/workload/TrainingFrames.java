package io.gpumem.trace.workload;

import io.gpumem.history.Frame;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * The stack frames the generated training loop attaches to each request: three frames, innermost first, as a
 * PyTorch snapshot stores them: the <em>op</em> that produced the tensor (e.g. {@code attn.qkv.out} in
 * {@code model.py}, its gradient in {@code backward.py}, AdamW state in {@code optim.py}), the <em>layer</em>
 * it belongs to ({@code layers.3}, {@code embed}, {@code lm_head}, ...), and the <em>phase</em> of the training
 * step ({@code model.forward}, {@code loss.backward}, {@code optimizer.step}, {@code build_model}).
 *
 * <p>Sites group naturally: the innermost frame names the op without its layer, so a report that groups by it
 * sums "attn.qkv.out" over all layers; the layer frame tells them apart in PyTorch's viewer.
 *
 * <p>Invariants: deterministic (line numbers are assigned per op in order of first use, as the generator asks
 * for stacks in op order); one shared list per distinct (kind, name), so writers that de-duplicate stacks emit
 * each once.
 */
final class TrainingFrames {
    private static final String MODEL = "gpumem_demo/model.py";
    private static final String BACKWARD = "gpumem_demo/backward.py";
    private static final String OPTIM = "gpumem_demo/optim.py";
    private static final String TRAIN = "gpumem_demo/train.py";

    private static final Frame BUILD = new Frame(TRAIN, 12, "build_model");
    private static final Frame FORWARD = new Frame(TRAIN, 31, "model.forward");
    private static final Frame BACKWARD_PHASE = new Frame(TRAIN, 33, "loss.backward");
    private static final Frame OPTIMIZER = new Frame(TRAIN, 35, "optimizer.step");
    private static final Frame LOAD = new Frame(TRAIN, 29, "load_batch");

    private final Map<String, Integer> opLines = new LinkedHashMap<>();
    private final Map<String, Frame> layerFrames = new HashMap<>();
    private final Map<String, List<Frame>> stacks = new HashMap<>();

    /** The stack of a tensor of {@code kind} named {@code name}: the same list object for the same pair. */
    List<Frame> stack(TensorKind kind, String name) {
        return stacks.computeIfAbsent(kind + " " + name, k -> build(kind, name));
    }

    private List<Frame> build(TensorKind kind, String name) {
        boolean backward = name.startsWith("grad.");
        String rest = backward ? name.substring("grad.".length()) : name;
        String layer;
        String op;
        if (rest.startsWith("layers.")) {
            int dot = rest.indexOf('.', "layers.".length());
            layer = dot < 0 ? rest : rest.substring(0, dot);
            op = dot < 0 ? rest : rest.substring(dot + 1);
        } else {
            int dot = rest.indexOf('.');
            layer = dot < 0 ? rest : rest.substring(0, dot);
            op = rest;
        }
        Frame layerFrame = layerFrames.computeIfAbsent(layer, l -> new Frame(MODEL, 100 + layerFrames.size(), l));
        return switch (kind) {
            case WEIGHT -> List.of(opFrame(MODEL, "init_parameters"), layerFrame, BUILD);
            case OPTIMIZER_STATE ->
                List.of(opFrame(OPTIM, name.endsWith(".exp_avg_sq") ? "exp_avg_sq" : "exp_avg"), layerFrame, OPTIMIZER);
            case GRADIENT -> List.of(opFrame(BACKWARD, "accumulate_grad"), layerFrame, BACKWARD_PHASE);
            case INPUT -> List.of(opFrame(TRAIN, op), LOAD);
            case ACTIVATION, TEMPORARY -> {
                if (name.endsWith(".adam_update")) {
                    yield List.of(opFrame(OPTIM, "adam_update"), layerFrame, OPTIMIZER);
                }
                yield backward
                        ? List.of(opFrame(BACKWARD, "grad " + op), layerFrame, BACKWARD_PHASE)
                        : List.of(opFrame(MODEL, op), layerFrame, FORWARD);
            }
        };
    }

    private Frame opFrame(String file, String function) {
        int line = opLines.computeIfAbsent(file + ":" + function, k -> 200 + opLines.size());
        return new Frame(file, line, function);
    }
}
