package io.gpumem.trace.category;

import io.gpumem.history.Frame;
import java.util.List;
import java.util.Locale;

/**
 * The phase of a training step a request was made in, read from its stack: the innermost frame that names a phase
 * decides. Python frames name it by function ({@code forward}, {@code _conv_forward}, {@code backward},
 * {@code _make_grads}, an optimizer's {@code step} in a file whose path holds "optim", anything naming
 * "optimizer"); a C++ frame of the autograd engine ({@code torch::autograd::Engine::...}) means backward, since
 * the engine runs every backward op. Other C++ frames are not read: operator names such as
 * {@code ..._backward} also occur in forward code paths of some kernels.
 */
enum Phase {
    FORWARD,
    BACKWARD,
    OPTIMIZER,
    /** No frame names a phase (setup, data loading, loss code called from the script). */
    UNKNOWN;

    static Phase of(List<Frame> frames) {
        for (Frame f : frames) {
            String name = f.name();
            if (!f.filename().endsWith(".py")) {
                if (name.startsWith("torch::autograd::Engine::")) {
                    return BACKWARD;
                }
                continue;
            }
            String function = name.toLowerCase(Locale.ROOT);
            if (function.contains("backward") || function.equals("_make_grads")) {
                return BACKWARD;
            }
            // the whole path: torch/optim/adamw.py names the optimizer in its folder, optimizers.py in its name
            String file = f.filename().toLowerCase(Locale.ROOT);
            if (function.contains("optimizer") || (function.equals("step") && file.contains("optim"))) {
                return OPTIMIZER;
            }
            if (function.contains("forward")) {
                return FORWARD;
            }
        }
        return UNKNOWN;
    }
}
