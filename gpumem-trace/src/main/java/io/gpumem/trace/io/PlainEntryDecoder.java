package io.gpumem.trace.io;

import io.gpumem.history.TraceEntry;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * The snapshot fast path of {@link PlainDataUnpickler}: decodes one device trace entry straight from its opcodes
 * into a {@link PlainEntry}, without building the dict the general decoder would, when the entry is plain (what
 * PyTorch and gpumem write): its own memo slot, a mark, then keys among {@code action, addr, size, stream,
 * time_us, device_free, frames}, each once, as strings (new or from the memo) with integer values of at most 64
 * bits (a string for {@code action}; for {@code frames} None, a list from the memo, or the entry's own list,
 * {@link #frames(PlainEntry)}), and {@code SETITEMS}, all within {@link #WINDOW_BYTES}. Anything else (another key or opcode,
 * a FRAME boundary, a long integer) is left to the general decoder, so every oddity is reported by the same
 * checks as before.
 *
 * <p>Why apart from the decoder: it is a second way of reading the same bytes, with its own rules (what counts as
 * plain) and its own state (the window, the undo log), and it shares only the memo, through a handful of
 * {@link PlainDataUnpickler} methods that the JIT inlines.
 *
 * <p>Invariants: a decode either ends after the entry's {@code SETITEMS} with the memo holding what the general
 * decoder would have stored (the entry's own slot marked consumed: it is handed to the sink at its
 * {@code APPEND(S)}), or gives up with every memo slot it wrote restored and the memo's size as it was. It reads
 * only {@code in[start, stop)}, which the caller has buffered. Not thread-safe; one per decoder.
 */
final class PlainEntryDecoder {

    /**
     * A device trace entry decoded straight from its opcodes, without a dict: the values of its keys, the bits of
     * the keys it has ({@link TraceEntry#ADDR} and so on), and its {@code frames} value as decoded (a list the
     * memo holds, the entry's own list, or {@code null}). Only a plain entry takes this form (see the class
     * comment); any other is decoded as a dict, so every oddity is reported by the same checks as before.
     */
    static final class PlainEntry {
        String action;
        int keys;
        long addr;
        long size;
        long stream;
        long timeUs;
        long deviceFree;
        boolean hasFrames;
        Object frames;
        /** The memo slot of {@code frames} when it is the entry's own list, decoded here; else −1. */
        int ownFramesSlot = -1;
        /**
         * What the sink made of {@code frames} (its shared stack), or null: {@link PlainDataUnpickler} then keeps that
         * in the list's memo slot instead of the list, which nothing but the memo holds any more.
         */
        Object converted;
    }

    /** The most bytes a plain entry may span (one has about 60 to 200, more with new frames). */
    static final int WINDOW_BYTES = 4096;

    /** The decoder whose memo an entry reads and writes. */
    private final PlainDataUnpickler memo;
    /** Memo slots written by the entry being decoded, with what they held, to undo when it turns out not plain. */
    private long[] undoSlot = new long[16];

    private Object[] undoValue = new Object[16];
    private int undoCount;
    /** The input, the next byte to read and where the entry being decoded must end. */
    private byte[] in;

    private int pos;
    private int stop;
    /** The integer the last {@link #integer()} decoded. */
    private long lastInteger;
    /** The memo slot the last {@link #memoize} stored in, or −1 when there was no memo opcode. */
    private int lastMemoSlot = -1;

    PlainEntryDecoder(PlainDataUnpickler memo) {
        this.memo = memo;
    }

    /**
     * Decodes the entry whose {@code EMPTY_DICT} was just read, from {@code in[start, stop)}, into {@code e}: the
     * position after it, or −1 when it is not plain (the memo then as it was before).
     */
    int decode(PlainEntry e, byte[] in, int start, int stop) {
        this.in = in;
        this.pos = start;
        this.stop = stop;
        long memoBefore = memo.memoSize();
        undoCount = 0;
        if (!body(e)) {
            for (int i = undoCount - 1; i >= 0; i--) {
                memo.restoreDenseMemo(undoSlot[i], undoValue[i]);
            }
            memo.resetMemoSize(memoBefore);
            return -1;
        }
        return pos;
    }

    private boolean body(PlainEntry e) {
        if (!memoize(PlainDataUnpickler.CONSUMED) || pos >= stop || in[pos++] != '(') {
            return false;
        }
        while (pos < stop) {
            if (in[pos] == 'u') {
                pos++;
                return e.action != null;
            }
            String key = string();
            if (key == null) {
                return false;
            }
            int bit;
            switch (key) {
                case "action" -> {
                    if (e.action != null) {
                        return false;
                    }
                    e.action = string();
                    if (e.action == null) {
                        return false;
                    }
                    continue;
                }
                case "frames" -> {
                    if (e.hasFrames || pos >= stop) {
                        return false;
                    }
                    e.hasFrames = true;
                    int op = in[pos++] & 0xff;
                    if (op == 'N') {
                        e.frames = null;
                    } else if (op == 'h' || op == 'j') {
                        Object v = memoGet(op == 'h' ? 1 : 4);
                        if (v == null
                                || PlainDataUnpickler.same(v, PlainDataUnpickler.ABSENT)
                                || PlainDataUnpickler.same(v, PlainDataUnpickler.CONSUMED)) {
                            return false;
                        }
                        e.frames = v;
                    } else if (op == ']') {
                        e.frames = frames(e);
                        if (e.frames == null) {
                            return false;
                        }
                    } else {
                        return false;
                    }
                    continue;
                }
                case "addr" -> bit = TraceEntry.ADDR;
                case "size" -> bit = TraceEntry.SIZE;
                case "stream" -> bit = TraceEntry.STREAM;
                case "time_us" -> bit = TraceEntry.TIME_US;
                case "device_free" -> bit = TraceEntry.DEVICE_FREE;
                default -> {
                    return false;
                }
            }
            if ((e.keys & bit) != 0 || !integer()) {
                return false;
            }
            e.keys |= bit;
            switch (bit) {
                case TraceEntry.ADDR -> e.addr = lastInteger;
                case TraceEntry.SIZE -> e.size = lastInteger;
                case TraceEntry.STREAM -> e.stream = lastInteger;
                case TraceEntry.TIME_US -> e.timeUs = lastInteger;
                default -> e.deviceFree = lastInteger;
            }
        }
        return false;
    }

    /**
     * An entry's own list of frames, its {@code EMPTY_LIST} just read, as PyTorch writes it: its memo store, then
     * its items (frame dicts from the memo, or new ones, {@link #frameDict}) between a mark and
     * {@code APPENDS}, or one item and {@code APPEND}, or none. The list is what the general decoder would build
     * (an {@code ArrayList} of the same dicts), or null when the bytes are anything else. Its memo slot goes to
     * {@code e.ownFramesSlot}.
     */
    private List<Object> frames(PlainEntry e) {
        List<Object> list = new ArrayList<>();
        if (!memoize(list) || pos >= stop) {
            return null;
        }
        e.ownFramesSlot = lastMemoSlot; // before the items' own memo stores
        if (in[pos] != '(') {
            int before = pos;
            Object single = frameItem();
            if (single == null) {
                pos = before; // an empty list: what follows is the entry's next key, or its end
                return list;
            }
            if (pos >= stop || in[pos] != 'a') {
                return null;
            }
            pos++;
            list.add(single);
            return list;
        }
        pos++;
        while (pos < stop) {
            if (in[pos] == 'e') {
                pos++;
                return list;
            }
            Object item = frameItem();
            if (item == null) {
                return null;
            }
            list.add(item);
        }
        return null;
    }

    /** A frame dict at {@code pos}: one from the memo (any dict), or a new one; null when there is none. */
    private Object frameItem() {
        if (pos >= stop) {
            return null;
        }
        int op = in[pos] & 0xff;
        if (op == 'h' || op == 'j') {
            pos++;
            return memoGet(op == 'h' ? 1 : 4) instanceof HashMap<?, ?> m ? m : null;
        }
        if (op == '}') {
            pos++;
            return frameDict();
        }
        return null;
    }

    /**
     * A new frame dict, its {@code EMPTY_DICT} just read: its memo store, a mark, string keys with string, small
     * integer or None values, each key once, and {@code SETITEMS}; built as the general decoder builds it (a {@code HashMap},
     * integers as {@code Integer}), or null when the bytes are anything else.
     */
    private Map<Object, Object> frameDict() {
        Map<Object, Object> dict = new HashMap<>(4);
        if (!memoize(dict) || pos >= stop || in[pos++] != '(') {
            return null;
        }
        while (pos < stop) {
            if (in[pos] == 'u') {
                pos++;
                return dict;
            }
            String key = string();
            // a key given twice: the general decoder keeps the first, as razorvine does; leave it to that
            if (key == null || pos >= stop || dict.containsKey(key)) {
                return null;
            }
            int op = in[pos] & 0xff;
            Object item;
            if (op == 'K' || op == 'M' || op == 'J') {
                if (!integer()) {
                    return null;
                }
                item = Integer.valueOf((int) lastInteger);
            } else if (op == 'N') {
                pos++;
                item = null;
            } else {
                item = string();
                if (item == null) {
                    return null;
                }
            }
            dict.put(key, item);
        }
        return null;
    }

    /** A string (new, with its optional memo store, or from the memo) at {@code pos}, or null when there is none. */
    private String string() {
        if (pos >= stop) {
            return null;
        }
        int op = in[pos++] & 0xff;
        if (op == 'h' || op == 'j') {
            return memoGet(op == 'h' ? 1 : 4) instanceof String s ? s : null;
        }
        int n;
        if (op == 0x8c && pos < stop) {
            n = in[pos++] & 0xff;
        } else if (op == 'X' && pos + 4 <= stop) {
            n = (in[pos] & 0xff) | (in[pos + 1] & 0xff) << 8 | (in[pos + 2] & 0xff) << 16 | in[pos + 3] << 24;
            pos += 4;
        } else {
            return null;
        }
        if (n < 0 || n > stop - pos) {
            return null;
        }
        String s = SnapshotKeys.canonical(new String(in, pos, n, StandardCharsets.UTF_8));
        pos += n;
        return memoize(s) ? s : null;
    }

    /** The memo value a {@code BINGET} (1-byte index) or {@code LONG_BINGET} (4) names, or null. */
    private Object memoGet(int indexBytes) {
        if (pos + indexBytes > stop) {
            return null;
        }
        long index = 0;
        for (int i = indexBytes - 1; i >= 0; i--) {
            index = index << 8 | (in[pos + i] & 0xff);
        }
        pos += indexBytes;
        return memo.denseMemo(index);
    }

    /** An integer of at most 64 bits ({@code BININT1/2}, {@code BININT}, {@code LONG1}) into {@link #lastInteger}. */
    private boolean integer() {
        if (pos >= stop) {
            return false;
        }
        int op = in[pos++] & 0xff;
        int n = switch (op) {
            case 'K' -> 1;
            case 'M' -> 2;
            case 'J' -> 4;
            case 0x8a -> pos < stop ? in[pos++] & 0xff : 9;
            default -> 9;
        };
        if (n > 8 || pos + n > stop) {
            return false;
        }
        long v = 0;
        for (int i = n - 1; i >= 0; i--) {
            v = v << 8 | (in[pos + i] & 0xff);
        }
        pos += n;
        if (op == 'J') {
            v = (v << 32) >> 32; // sign-extends the 32-bit value
        } else if (op == 0x8a && n > 0) {
            int unused = 64 - 8 * n;
            v = (v << unused) >> unused;
        }
        lastInteger = v;
        return true;
    }

    /** Performs the memo store ({@code BINPUT}, {@code LONG_BINPUT}, {@code MEMOIZE}) at {@code pos}, if any, of {@code v}. */
    private boolean memoize(Object v) {
        if (pos >= stop) {
            return false;
        }
        int op = in[pos] & 0xff;
        long index;
        if (op == 'q' && pos + 2 <= stop) {
            index = in[pos + 1] & 0xff;
            pos += 2;
        } else if (op == 'r' && pos + 5 <= stop) {
            index = (in[pos + 1] & 0xffL)
                    | (in[pos + 2] & 0xffL) << 8
                    | (in[pos + 3] & 0xffL) << 16
                    | (in[pos + 4] & 0xffL) << 24;
            pos += 5;
        } else if (op == 0x94) {
            index = memo.memoSize();
            pos++;
        } else {
            lastMemoSlot = -1;
            return op != 'q' && op != 'r';
        }
        Object before = memo.storeDenseMemo(index, v);
        if (PlainDataUnpickler.same(before, PlainDataUnpickler.NOT_DENSE)) {
            return false;
        }
        lastMemoSlot = (int) index;
        if (undoCount == undoSlot.length) { // an entry's new frames write a few slots each
            undoSlot = Arrays.copyOf(undoSlot, 2 * undoCount);
            undoValue = Arrays.copyOf(undoValue, 2 * undoCount);
        }
        undoSlot[undoCount] = index;
        undoValue[undoCount++] = before;
        return true;
    }
}
