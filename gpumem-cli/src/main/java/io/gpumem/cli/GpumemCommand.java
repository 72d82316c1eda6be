package io.gpumem.cli;

import java.io.PrintWriter;
import java.util.concurrent.Callable;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Spec;

/**
 * What every {@code gpumem} subcommand shares: picocli injects the command's model ({@link #spec}), through which
 * the command writes ({@link #out()}, {@link #err()}, the streams a test or {@link GpumemCli} set) and names itself
 * in a {@code ParameterException}. A subcommand adds its options and {@link #call()}, which returns the exit status;
 * bad input is thrown, and {@link GpumemCli} reports it (exit 2).
 */
public abstract class GpumemCommand implements Callable<Integer> {

    @Spec
    protected CommandSpec spec;

    /** Where the command prints its results. */
    protected final PrintWriter out() {
        return spec.commandLine().getOut();
    }

    /** Where the command prints notes and warnings. */
    protected final PrintWriter err() {
        return spec.commandLine().getErr();
    }
}
