package io.gpumem.script;

/**
 * One operation of an ops script. Every op remembers its 1-based source line so that whoever runs it can
 * report problems (an OOM, a device failure) against the line that caused them.
 */
public sealed interface ScriptOp {

    /** The 1-based line the op was read from. */
    int line();

    /** Stream number meaning the device's default stream. */
    long DEFAULT_STREAM = 0;

    /** {@code device capacity=SIZE [granularity=SIZE] [held=SIZE]}; granularity is 0 when not given. */
    record DeviceSettings(int line, long capacity, long granularity, long held) implements ScriptOp {}

    /** {@code config STRING}: a {@code PYTORCH_CUDA_ALLOC_CONF} string, already checked to parse. */
    record Config(int line, String conf) implements ScriptOp {}

    /** {@code alloc NAME SIZE [stream=N]}. */
    record Alloc(int line, String name, long size, long stream) implements ScriptOp {}

    /** {@code free NAME}. */
    record Free(int line, String name) implements ScriptOp {}

    /** {@code record_stream NAME STREAM}. */
    record RecordStream(int line, String name, long stream) implements ScriptOp {}

    /** {@code complete_events}: every event recorded so far completes (the GPU catches up). */
    record CompleteEvents(int line) implements ScriptOp {}

    /** {@code empty_cache}. */
    record EmptyCache(int line) implements ScriptOp {}

    /** {@code set_fraction F}, F in [0, 1]. */
    record SetFraction(int line, double fraction) implements ScriptOp {}

    /** {@code reset_peak}. */
    record ResetPeak(int line) implements ScriptOp {}

    /** {@code summary [abbreviated]}. */
    record Summary(int line, boolean abbreviated) implements ScriptOp {}

    /** {@code stats}. */
    record Stats(int line) implements ScriptOp {}

    /** {@code snapshot FILE}: write {@code torch.cuda.memory._dump_snapshot(FILE)} (a PyTorch snapshot pickle). */
    record Snapshot(int line, String file) implements ScriptOp {}
}
