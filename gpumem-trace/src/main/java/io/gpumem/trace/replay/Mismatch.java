package io.gpumem.trace.replay;

/**
 * The first point where a replay departed from the recording.
 *
 * @param device   device index of the trace
 * @param entry    index of the trace entry in that device's trace
 * @param kind     what differed: {@code alloc}, {@code segment}, {@code release}, {@code free}
 * @param expected what the recording says
 * @param got      what the model did
 * @param context  the entries just before, for a human reader
 */
public record Mismatch(int device, int entry, String kind, String expected, String got, String context) {

    @Override
    public String toString() {
        return "device " + device + " entry " + entry + " (" + kind + "): expected " + expected + ", got " + got;
    }
}
