package io.gpumem.cli.options;

/**
 * Input a command refuses before or while it works: an option value that does not parse or does not fit the
 * others, a device or entry the file does not have, a file the command cannot write. The message names the
 * option, file, entry or field at fault; {@code GpumemCli} prints it as {@code gpumem COMMAND: message} and exits
 * with status 2, the one place every command's bad input is reported.
 */
public final class BadInputException extends RuntimeException {

    public BadInputException(String message) {
        super(message);
    }

    public BadInputException(String message, Throwable cause) {
        super(message, cause);
    }
}
