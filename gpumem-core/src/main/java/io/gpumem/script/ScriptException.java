package io.gpumem.script;

/** A malformed ops script: {@link #line()} is the 1-based line, {@link #detail()} what is wrong with it. */
public final class ScriptException extends IllegalArgumentException {
    private final int line;
    private final String detail;

    public ScriptException(int line, String detail) {
        super("line " + line + ": " + detail);
        this.line = line;
        this.detail = detail;
    }

    public int line() {
        return line;
    }

    public String detail() {
        return detail;
    }
}
