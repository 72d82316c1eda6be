package io.gpumem.trace.session;

import io.gpumem.trace.replay.WhatIfReplay;
import io.gpumem.trace.window.WindowStart;

/**
 * One device's trace window as a {@link TraceSession} prepares it, once: the start state rebuilt under the
 * recorded configuration and the request stream compiled from it (inside {@link WhatIfReplay}, which only reads
 * both, so every what-if of the session shares them).
 *
 * @param device the device trace
 * @param start  the window's rebuilt start state
 * @param replay the compiled request stream and the what-if replays over it
 */
public record DeviceWindow(int device, WindowStart start, WhatIfReplay replay) {}
