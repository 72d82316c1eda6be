package io.gpumem.cli.analysis;

import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.gpumem.cli.CliRun;
import io.gpumem.cli.JsonTree;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * {@code gpumem analyze --json} on the shared traces: issue 17's checks through the command a user runs. Every
 * device's object has {@code live_at_peak} and {@code live_at_end} with exactly the six categories, the first summing
 * to {@code peak_allocated}; AdamW training ends with optimizer state within 2% of twice the gradients and no more
 * gradients than parameters; inference has neither; remedies come best first, each saying how to apply it. Prints the
 * figures per trace. Skipped, saying so, without {@code ../shared/traces}.
 */
class AnalyzeJsonTest {
    private static final List<String> SIX =
            List.of("parameters", "gradients", "optimizer_state", "activations", "temporaries", "other");

    static List<Map<String, Object>> analyze(String name) throws IOException {
        String dir = System.getProperty("gpumem.traces.dir");
        Path file = dir == null ? null : Path.of(dir, name);
        assumeTrue(file != null && Files.isRegularFile(file), "trace " + name + " not available: skipped");
        CliRun run = CliRun.run("analyze", file.toString(), "--json", "--no-compare");
        assertThat(run.exit()).as(run.err()).isZero();
        Object doc = JsonTree.parse(run.out());
        List<Map<String, Object>> devices = new ArrayList<>();
        if (doc instanceof List<?> l) {
            l.forEach(o -> devices.add(asMap(o)));
        } else {
            devices.add(asMap(doc));
        }
        for (Map<String, Object> d : devices) {
            System.out.println(name + " device " + d.get("device") + ": peak_allocated " + d.get("peak_allocated")
                    + ", live_at_peak " + d.get("live_at_peak") + ", live_at_end " + d.get("live_at_end"));
            Map<String, Object> peak = asMap(d.get("live_at_peak"));
            assertThat(peak.keySet()).containsExactlyElementsOf(SIX);
            assertThat(asMap(d.get("live_at_end")).keySet()).containsExactlyElementsOf(SIX);
            assertThat(sum(peak)).as("live_at_peak sums to peak_allocated").isEqualTo(d.get("peak_allocated"));
            List<Map<String, Object>> remedies = new ArrayList<>();
            ((List<?>) d.get("remedies")).forEach(r -> remedies.add(asMap(r)));
            assertThat(remedies)
                    .isSortedAccordingTo((a, b) -> Long.compare((Long) b.get("saves"), (Long) a.get("saves")));
            assertThat(remedies)
                    .allSatisfy(r -> assertThat((String) r.get("how")).isNotBlank());
            assertThat(asMap(d.get("verdict"))).containsKeys("kind", "headline", "because");
        }
        return devices;
    }

    @ParameterizedTest
    @ValueSource(
            strings = {
                "lm2.7b-train-step.pickle",
                "lm2.7b-sweep-ctx128.pickle",
                "lm2.7b-sweep-ctx256.pickle",
                "lm-medium-train-ctx128.pickle",
                "lm-medium-train-ctx256.pickle"
            })
    void adamwTrainingEndsWithTwoStatesPerGradient(String name) throws IOException {
        Map<String, Object> end = asMap(analyze(name).getFirst().get("live_at_end"));
        long gradients = (Long) end.get("gradients");
        long optimizer = (Long) end.get("optimizer_state");
        assertThat(gradients).isPositive().isLessThanOrEqualTo((Long) end.get("parameters"));
        assertThat((double) optimizer).isBetween(2 * gradients * 0.98, 2 * gradients * 1.02);
    }

    @ParameterizedTest
    @ValueSource(
            strings = {
                "lm-medium-infer-ctx128.pickle",
                "lm-medium-infer-ctx512.pickle",
                "llama-offload-10-streams.pickle",
                "tiny-forward.pickle",
                "opt1.3b-state-only.pickle",
                "gnn-train-expandable-oom.pickle"
            })
    void everyDeviceSumsAndInferenceHasNoGradientsOrOptimizerState(String name) throws IOException {
        List<Map<String, Object>> devices = analyze(name);
        if (name.contains("infer") || name.startsWith("llama")) {
            for (String moment : List.of("live_at_peak", "live_at_end")) {
                assertThat(asMap(devices.getFirst().get(moment)))
                        .containsEntry("gradients", 0L)
                        .containsEntry("optimizer_state", 0L);
            }
        }
        if (name.startsWith("gnn")) {
            assertThat(devices).hasSize(3);
            Map<String, Object> oom = devices.get(1);
            assertThat(oom).containsKeys("oom_entry", "live_at_oom");
            assertThat(asMap(oom.get("live_at_oom")).keySet()).containsExactlyElementsOf(SIX);
        }
        if (name.startsWith("opt1.3b")) {
            Map<String, Object> peak = asMap(devices.getFirst().get("live_at_peak"));
            assertThat(peak.get("other")).isEqualTo(devices.getFirst().get("allocated"));
        }
    }

    private static long sum(Map<String, Object> split) {
        long s = 0;
        for (Object v : split.values()) {
            s += (Long) v;
        }
        return s;
    }

    @SuppressWarnings("unchecked")
    private static Map<String, Object> asMap(Object o) {
        return (Map<String, Object>) o;
    }
}
