package io.gpumem.cli.trace;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpumem.cli.CliRun;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/**
 * {@code gpumem predict}: predicting a recorded size from the laws over it and another size reproduces compare's
 * figures for the real recording (the method's own check), the JSON rows carry compare's keys plus at,
 * predicted_requests and unpredicted_requests, and bad input exits 2 with a message. Skipped, saying so, without
 * {@code ../shared/traces}.
 */
class PredictCommandTest {

    @SuppressWarnings("unchecked")
    static List<Map<String, Object>> rows(String json) throws Exception {
        return (List<Map<String, Object>>) DiffCommandTest.parse(json);
    }

    @Test
    void predictingARecordedSizeReproducesItsCompareRow() throws Exception {
        String a = DiffCommandTest.trace("lm-medium-train-ctx128.pickle");
        String b = DiffCommandTest.trace("lm-medium-train-ctx256.pickle");
        CliRun predicted =
                CliRun.run("predict", a + "@128", b + "@256", "--at", "256", "--capacity", "80GiB", "--json");
        assertThat(predicted.exit()).as(predicted.err()).isZero();
        CliRun real = CliRun.run("compare", b, "--json");
        Map<String, Object> p = rows(predicted.out()).get(0);
        Map<String, Object> r = rows(real.out()).get(0);
        assertThat(p.keySet()).containsAll(r.keySet()).contains("at", "predicted_requests", "unpredicted_requests");
        assertThat(p.get("at")).isEqualTo(256L);
        // the reference is the recording nearest the target (here the 256 one itself): its 6,624 requests, of
        // which the 6,526 both recordings share have a law
        assertThat((Long) p.get("predicted_requests") + (Long) p.get("unpredicted_requests"))
                .isEqualTo(6624L);
        assertThat(p.get("predicted_requests")).isEqualTo(6526L);
        double peak = (Long) p.get("peak_allocated");
        double realPeak = (Long) r.get("peak_allocated");
        System.out.printf(
                "predict medium-train at 256: peak allocated %.0f vs %.0f, min capacity %s vs %s%n",
                peak, realPeak, p.get("min_capacity"), r.get("min_capacity"));
        assertThat(Math.abs(peak - realPeak) / realPeak).isLessThan(0.001);
        double cap = (Long) p.get("min_capacity");
        double realCap = (Long) r.get("min_capacity");
        assertThat(Math.abs(cap - realCap) / realCap).isLessThan(0.02);
    }

    @Test
    void extrapolatesTheInferenceToContext512() throws Exception {
        String a = DiffCommandTest.trace("lm-medium-infer-ctx128.pickle");
        String b = DiffCommandTest.trace("lm-medium-infer-ctx256.pickle");
        CliRun run = CliRun.run("predict", a + "@128", b + "@256", "--at", "512", "--capacity", "8GiB");
        assertThat(run.exit()).as(run.err()).isZero();
        assertThat(run.out())
                .contains("predicted at 512")
                .contains("1280 requests predicted")
                .contains("recorded (");
    }

    @Test
    void badInputExitsTwo() {
        String a = DiffCommandTest.trace("lm-medium-infer-ctx128.pickle");
        String other = DiffCommandTest.trace("nca-train-empty-cache.pickle");
        CliRun one = CliRun.run("predict", a + "@128", "--at", "512");
        assertThat(one.exit()).isEqualTo(2);
        assertThat(one.err()).contains("gpumem predict:").contains("two or more");
        CliRun equal = CliRun.run("predict", a + "@128", a + "@128", "--at", "512");
        assertThat(equal.exit()).isEqualTo(2);
        assertThat(equal.err()).contains("same label 128");
        CliRun noLabel = CliRun.run("predict", a, a + "@256", "--at", "512");
        assertThat(noLabel.exit()).isEqualTo(2);
        assertThat(noLabel.err()).contains("FILE@VALUE");
        CliRun unrelated = CliRun.run("predict", a + "@128", other + "@256", "--at", "512");
        assertThat(unrelated.exit()).isEqualTo(2);
        assertThat(unrelated.err()).contains("do not look like the same program");
        CliRun missing = CliRun.run("predict", a + "@128", "missing.pickle@256", "--at", "512");
        assertThat(missing.exit()).isEqualTo(2);
        assertThat(missing.err()).contains("missing.pickle");
        assertThat(missing.out()).isEmpty();
    }
}
