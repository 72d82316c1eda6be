package io.gpumem.history;

import java.util.List;

/** One record of a 2.0-format block's {@code history} list: {@code {addr, real_size, frames}}. */
public record BlockHistory(long addr, long realSize, List<Frame> frames) {}
