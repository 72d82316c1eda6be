package io.gpumem.alloc;

import org.jspecify.annotations.Nullable;

/**
 * What every block kept in a {@link BlockTree} carries: its order key (stream, size, address) and the intrusive
 * treap links. Both allocator families' blocks extend it, the exact allocator's {@link Block} and the stitch
 * policy's block, so that one treap serves both and neither pays for a node object per insertion.
 *
 * <p>The key fields are public because the policy package's block lives outside this package; only the
 * allocator that owns a block writes them, and never while the block is in a tree (remove it first, or use
 * {@link BlockTree#rekeyInPlace}). The links, the priority and the container are package-private: only
 * {@link BlockTree} and {@link SizeOrderedBlocks} touch them.
 *
 * <p>Layout: a separate superclass so that the JVM lays these fields out first and together in the object (it
 * places a superclass's fields before its subclass's; within a class it groups fields by size, which would put
 * the links after every other long field, a cache line away from the key). A tree walk reads only these fields.
 *
 * @param <B> the concrete block type, so that links and tree results need no cast at the call site
 */
public abstract class OrderedBlock<B extends OrderedBlock<B>> {
    /** The block's device address. */
    public long ptr;
    /** The block's size in bytes. */
    public long size;
    /** The stream handle the block belongs to (compared as unsigned in the tree order). */
    public long stream;
    /** Treap links (null when absent or when the block is in no tree) and the heap priority. */
    @Nullable
    B left;

    @Nullable
    B right;

    @Nullable
    B parent;

    int priority;
    /** The {@link SizeOrderedBlocks} or stand-alone {@link BlockTree} holding the block; null when in neither. */
    @Nullable
    Object container;

    /** Whether the block is in some tree or size-ordered set. */
    public final boolean inTree() {
        return container != null;
    }
}
