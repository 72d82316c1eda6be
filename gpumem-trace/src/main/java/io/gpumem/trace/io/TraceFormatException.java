package io.gpumem.trace.io;

/**
 * A trace file that cannot be read: malformed, truncated, of an unknown format or over a size limit.
 * The message names the file, where in it the problem is (entry index, line or key path) and the field.
 */
public class TraceFormatException extends RuntimeException {
    private final String file;
    private final String location;

    public TraceFormatException(String file, String location, String message) {
        super(text(file, location, message));
        this.file = file;
        this.location = location == null ? "" : location;
    }

    public TraceFormatException(String file, String location, String message, Throwable cause) {
        super(text(file, location, message), cause);
        this.file = file;
        this.location = location == null ? "" : location;
    }

    /** {@code file: location: message}, without the location when there is none. */
    private static String text(String file, String location, String message) {
        return file + (location == null || location.isEmpty() ? "" : ": " + location) + ": " + message;
    }

    /** The file (as given by the caller). */
    public String file() {
        return file;
    }

    /** Where in the file, e.g. {@code device_traces[0][17].size} or {@code line 12}; "" for the whole file. */
    public String location() {
        return location;
    }
}
