package io.gpumem.trace.workload;

/**
 * One step of a generated request stream: what a program asks of the allocator, with nothing about
 * where it lands. Ids are dense from 0 in allocation order; a {@link Free} names an earlier {@link Alloc}.
 */
public sealed interface MemoryOp permits MemoryOp.Alloc, MemoryOp.Free, MemoryOp.StepStart {

    /** Allocate {@code bytes} (the caller's unrounded request) on {@code stream}. */
    record Alloc(int id, long bytes, long stream, TensorKind kind, String name) implements MemoryOp {}

    /** Free the allocation {@code id}. */
    record Free(int id) implements MemoryOp {}

    /** Marks the start of training step {@code step} (0-based) with its sequence length. */
    record StepStart(int step, int seqLen) implements MemoryOp {}
}
