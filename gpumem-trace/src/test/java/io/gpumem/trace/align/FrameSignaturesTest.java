package io.gpumem.trace.align;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpumem.history.Frame;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * Frame lists as alignment tokens: equal lists share an index whether or not they are the same object, the label a
 * site is printed under (the innermost Python line, else the ATen operator, marked when autograd called it, else the
 * innermost frame outside the allocator's own), and the reduced stack that survives moved lines and another kernel.
 */
class FrameSignaturesTest {

    private static Frame py(String file, long line, String name) {
        return new Frame(file, line, name);
    }

    private static Frame cpp(String name) {
        return new Frame("??", 0, name);
    }

    @Test
    void equalListsShareAnIndexWhetherOrNotTheyAreTheSameObject() {
        FrameSignatures sigs = new FrameSignatures();
        List<Frame> a = List.of(py("/src/model.py", 12, "forward"), py("/src/train.py", 40, "step"));
        int id = sigs.intern(a);
        assertThat(sigs.intern(a)).isEqualTo(id);
        assertThat(sigs.intern(new ArrayList<>(a)))
                .as("an equal list, another object")
                .isEqualTo(id);
        int other = sigs.intern(List.of(py("/src/model.py", 13, "forward")));
        assertThat(other).isNotEqualTo(id);
        assertThat(sigs.count()).isEqualTo(2);
        assertThat(sigs.frames(id)).isEqualTo(a);
    }

    @Test
    void aSiteIsLabelledByItsInnermostPythonLineElseItsOperatorElseItsInnermostOwnFrame() {
        FrameSignatures sigs = new FrameSignatures();
        List<Frame> python = List.of(
                cpp("torch::unwind::unwind()"),
                cpp("at::_ops::empty_strided::call"),
                py("/opt/lib/python3.11/site-packages/torch/nn/modules/linear.py", 125, "forward"),
                py("/src/train.py", 40, "step"));
        assertThat(sigs.label(sigs.intern(python))).isEqualTo("linear.py:125 forward");

        List<Frame> op = List.of(
                cpp("c10::cuda::CUDACachingAllocator::Native::DeviceCachingAllocator::malloc"),
                cpp("at::_ops::mm::redispatch"),
                cpp("at::_ops::addmm::call"));
        assertThat(sigs.label(sigs.intern(op)))
                .as("the innermost operator, cut at its name")
                .isEqualTo("at::_ops::mm");

        List<Frame> backward = List.of(
                cpp("at::_ops::mul::call"), cpp("torch::autograd::Engine::thread_main(std::shared_ptr<GraphTask>)"));
        assertThat(sigs.label(sigs.intern(backward))).isEqualTo("at::_ops::mul (autograd)");

        List<Frame> nothingKnown = List.of(
                cpp("torch::unwind::unwind()"),
                cpp("torch::CapturedTraceback::gather(bool, bool, bool)"),
                cpp("gather_with_cpp"),
                cpp("c10::cuda::CUDACachingAllocator::malloc(void**, int, unsigned long)"),
                cpp("cublasLtMatmul(cublasLtContext*, void*)"),
                cpp("main"));
        assertThat(sigs.label(sigs.intern(nothingKnown)))
                .as("the innermost frame that is not the allocator's or the unwinder's, without its arguments")
                .isEqualTo("cublasLtMatmul");

        List<Frame> onlyOwn = List.of(cpp("torch::unwind::unwind()"), cpp("c10::cuda::CUDACachingAllocator::malloc"));
        assertThat(sigs.label(sigs.intern(onlyOwn)))
                .as("nothing else: the innermost")
                .isEqualTo("torch::unwind::unwind()");
        assertThat(sigs.label(sigs.intern(List.of()))).isEqualTo("(no frames)");
    }

    @Test
    void theReducedStackKeepsPythonFunctionsAndTheAllocatingLineOnly() {
        FrameSignatures sigs = new FrameSignatures();
        int a = sigs.intern(
                List.of(cpp("at::_ops::mm::call"), py("/a/model.py", 12, "forward"), py("/a/train.py", 40, "step")));
        int outerLineMoved = sigs.intern(
                List.of(cpp("at::_ops::bmm::call"), py("/b/model.py", 12, "forward"), py("/b/train.py", 41, "step")));
        int innerLineMoved = sigs.intern(
                List.of(cpp("at::_ops::mm::call"), py("/a/model.py", 13, "forward"), py("/a/train.py", 40, "step")));
        assertThat(sigs.withoutLines(outerLineMoved))
                .as("another kernel, another directory, an outer line moved: the same reduced stack")
                .isEqualTo(sigs.withoutLines(a));
        assertThat(sigs.withoutLines(innerLineMoved))
                .as("the allocating line moved")
                .isNotEqualTo(sigs.withoutLines(a));

        int engine =
                sigs.intern(List.of(cpp("at::_ops::mul::call"), cpp("torch::autograd::Engine::evaluate_function")));
        int engineOtherLine = sigs.intern(List.of(
                new Frame("??", 7, "at::_ops::mul::call"),
                new Frame("??", 9, "torch::autograd::Engine::evaluate_function")));
        int engineOtherOp =
                sigs.intern(List.of(cpp("at::_ops::add::call"), cpp("torch::autograd::Engine::evaluate_function")));
        assertThat(sigs.withoutLines(engineOtherLine))
                .as("without Python every frame's name counts, no line")
                .isEqualTo(sigs.withoutLines(engine));
        assertThat(sigs.withoutLines(engineOtherOp)).isNotEqualTo(sigs.withoutLines(engine));
    }
}
