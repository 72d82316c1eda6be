package io.gpumem.cli.options;

import io.gpumem.cli.SizeConverter;
import io.gpumem.trace.io.ReadLimits;
import picocli.CommandLine.Option;

/**
 * The reading limits of every command that reads a trace or lifetime file ({@code replay}, {@code compare},
 * {@code analyze}, {@code report}, {@code plan}): one pair of options with one default, so that a file one command
 * refuses, every command refuses with the same message.
 */
public final class ReadLimitOptions {

    @Option(
            names = "--max-file-size",
            paramLabel = "SIZE",
            defaultValue = "4GiB",
            converter = SizeConverter.class,
            description = "Refuse files larger than SIZE (default: ${DEFAULT-VALUE}).")
    long maxFileSize;

    @Option(
            names = "--max-entries",
            paramLabel = "N",
            description = "Refuse files with more than N trace entries or rows (default: ${DEFAULT-VALUE}).")
    long maxEntries = ReadLimits.DEFAULT.maxEntries();

    /**
     * The limits the options give.
     *
     * @throws BadInputException when {@code --max-entries} is not positive
     */
    public ReadLimits limits() {
        if (maxEntries <= 0) {
            throw new BadInputException("--max-entries must be positive");
        }
        return new ReadLimits(maxFileSize, maxEntries);
    }
}
