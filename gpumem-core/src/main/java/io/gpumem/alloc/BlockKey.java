package io.gpumem.alloc;

/**
 * The fields of a {@link Block} that an ordered-tree walk reads on every node: the order key (stream, size,
 * address) and the intrusive treap links and priority of {@link BlockTree}. A separate superclass only so that
 * the JVM lays these fields out first and together in the object (it places a superclass's fields before its
 * subclass's; within a class it groups fields by size, which would put the links after every other long field
 * and int, a cache line away from the key). No behaviour lives here; {@link Block} documents the fields' meaning.
 */
abstract sealed class BlockKey permits Block {
    long ptr;
    long size;
    long stream;
    /** Treap links (null when absent or when the block is in no tree) and the heap priority. */
    Block left;
    Block right;
    Block parent;
    int priority;
}
