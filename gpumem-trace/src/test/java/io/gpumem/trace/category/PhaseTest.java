package io.gpumem.trace.category;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpumem.history.Frame;
import java.util.List;
import org.junit.jupiter.api.Test;

/** Reading the phase from a stack: the innermost frame that names one decides; C++ frames only via the engine. */
class PhaseTest {

    static Frame py(String file, String function) {
        return new Frame(file, 10, function);
    }

    static Frame cpp(String function) {
        return new Frame("??", 0, function);
    }

    @Test
    void pythonFramesNameForwardBackwardAndOptimizer() {
        assertThat(Phase.of(List.of(py("/x/functional.py", "einsum"), py("/m/transformer.py", "forward"))))
                .isEqualTo(Phase.FORWARD);
        assertThat(Phase.of(List.of(py("/torch/autograd/__init__.py", "_make_grads"))))
                .isEqualTo(Phase.BACKWARD);
        assertThat(Phase.of(List.of(py("/m/optimizers.py", "step"), py("/m/train.py", "main"))))
                .isEqualTo(Phase.OPTIMIZER);
        assertThat(Phase.of(List.of(py("/m/model.py", "step"))))
                .as("a step outside an optimizer file")
                .isEqualTo(Phase.UNKNOWN);
    }

    @Test
    void theInnermostNamingFrameWinsAndOnlyTheAutogradEngineSpeaksForCpp() {
        // optimizer code called from a function named forward: the optimizer frame is innermost
        assertThat(Phase.of(List.of(py("/torch/optim/adamw.py", "step"), py("/m/wrapper.py", "forward"))))
                .isEqualTo(Phase.OPTIMIZER);
        assertThat(Phase.of(List.of(cpp("at::_ops::mm::call"), cpp("torch::autograd::Engine::thread_main"))))
                .isEqualTo(Phase.BACKWARD);
        assertThat(Phase.of(List.of(cpp("at::native::embedding_backward"), py("/m/model.py", "forward"))))
                .as("operator names are not read")
                .isEqualTo(Phase.FORWARD);
        assertThat(Phase.of(List.of(py("/m/train.py", "load_batch")))).isEqualTo(Phase.UNKNOWN);
        assertThat(Phase.of(List.of())).isEqualTo(Phase.UNKNOWN);
    }

    @Test
    void everyRuleGivesOneCategoryAndOnlyOtherHasNoConfidence() {
        for (CategoryRule r : CategoryRule.values()) {
            assertThat(r.confidence() == CategoryRule.Confidence.NONE)
                    .as(r.name())
                    .isEqualTo(r.category() == ByteCategory.OTHER);
        }
    }
}
