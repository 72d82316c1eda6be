package io.gpumem.testing;

import java.util.Optional;
import org.junit.jupiter.api.extension.ExtensionContext;
import org.junit.jupiter.api.extension.TestWatcher;

/**
 * Prints why a test was skipped, one line per skipped test, on the console of the build.
 *
 * <p>Surefire counts skipped tests ("Skipped: 3") but does not say why, so a run without the shared traces,
 * python3 or a GPU would look the same as a run with broken assumptions. Tests skip through JUnit
 * assumptions whose message names what is missing (for example "real traces not available (system property
 * gpumem.traces.dir = ...)"); this watcher prints that message as
 * {@code [gpumem tests] SKIPPED Class.method() [case]: reason}. Tests switched off by JUnit's disabling
 * annotation are not used in this project and are not reported.
 *
 * <p>It is registered for every module through Java's service loader (this module's test-jar carries
 * {@code META-INF/services/org.junit.jupiter.api.extension.Extension}) and the parent pom's Surefire setting
 * {@code junit.jupiter.extensions.autodetection.enabled=true}. It keeps no state.
 */
public final class SkipReasonReporter implements TestWatcher {

    @Override
    public void testAborted(ExtensionContext context, Throwable cause) {
        String method = context.getTestMethod().map(m -> m.getName() + "()").orElse("");
        String where = context.getRequiredTestClass().getSimpleName() + "." + method;
        if (!context.getDisplayName().equals(method)) {
            where += " " + context.getDisplayName(); // which case of a parameterised test
        }
        String reason = cause == null || cause.getMessage() == null ? "no reason given" : cause.getMessage();
        System.out.println("[gpumem tests] SKIPPED " + where + ": " + reason.replaceFirst("^Assumption failed: ", ""));
    }

    @Override
    public void testDisabled(ExtensionContext context, Optional<String> reason) {
        // this project switches no test off by annotation; nothing to report
    }
}
