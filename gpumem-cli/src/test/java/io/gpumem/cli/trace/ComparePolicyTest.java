package io.gpumem.cli.trace;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpumem.cli.CliRun;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/** {@code compare --policy}: the stitch and planned rows against the PyTorch rows on a shared trace. */
class ComparePolicyTest {

    @Test
    void stitchAndPlannedRowsBeatExpandableSegmentsOnTinyForward() throws Exception {
        var f = TraceCommandsTest.trace("tiny-forward.pickle");
        CliRun r = CliRun.run(
                "compare",
                f.toString(),
                "--config",
                "expandable_segments:True",
                "--policy",
                "stitch",
                "--policy",
                "planned",
                "--json");
        assertThat(r.exit()).as(r.err()).isZero();
        List<Map<String, Object>> rows = TraceCommandsTest.parseArray(r.lastLine());
        assertThat(rows).extracting(m -> m.get("policy")).containsExactly("pytorch", "pytorch", "stitch", "planned");
        long expandable = ((Number) rows.get(1).get("min_capacity")).longValue();
        Map<String, Object> stitch = rows.get(2);
        Map<String, Object> planned = rows.get(3);
        assertThat(((Number) stitch.get("min_capacity")).longValue()).isLessThanOrEqualTo(expandable);
        assertThat(((Number) stitch.get("device_maps")).longValue()).isPositive();
        assertThat(((Number) stitch.get("retries")).longValue())
                .isLessThanOrEqualTo(((Number) rows.get(1).get("retries")).longValue());
        long peak = ((Number) planned.get("peak_allocated")).longValue();
        assertThat(((Number) planned.get("min_capacity")).longValue()).isLessThanOrEqualTo((long) (1.005 * peak));
        assertThat(Double.parseDouble(String.valueOf(planned.get("ns_per_pair"))))
                .isPositive();
    }

    @Test
    void rmmPoolRowsCarryTheirOptionsAndRoundTo256Bytes() throws Exception {
        var f = TraceCommandsTest.trace("tiny-forward.pickle");
        CliRun r = CliRun.run(
                "compare", f.toString(), "--policy", "rmm-pool:initial=0", "--policy", "rmm-pool:max=8GiB", "--json");
        assertThat(r.exit()).as(r.err()).isZero();
        List<Map<String, Object>> rows = TraceCommandsTest.parseArray(r.lastLine());
        assertThat(rows).extracting(m -> m.get("policy")).containsExactly("pytorch", "rmm-pool", "rmm-pool");
        assertThat(rows).extracting(m -> m.get("config")).containsExactly("", "initial=0", "max=8GiB");
        long pytorchAllocated = ((Number) rows.get(0).get("peak_allocated")).longValue();
        for (Map<String, Object> rmm : rows.subList(1, 3)) {
            long allocated = ((Number) rmm.get("peak_allocated")).longValue();
            // the same requests, rounded to 256 bytes rather than PyTorch's 512
            assertThat(allocated).isLessThanOrEqualTo(pytorchAllocated).isPositive();
            assertThat(((Number) rmm.get("peak_reserved")).longValue()).isGreaterThanOrEqualTo(allocated);
            assertThat(((Number) rmm.get("device_allocs")).longValue()).isPositive();
        }
        assertThat(((Number) rows.get(2).get("peak_reserved")).longValue())
                .as("max=8GiB alone: a pool capped at 8 GiB")
                .isLessThanOrEqualTo(8L << 30);
        // a pool capped below what the trace holds at once: no capacity runs it, and the refusal says a policy may cap
        CliRun capped = CliRun.run("compare", f.toString(), "--policy", "rmm-pool:max=1GiB");
        assertThat(capped.exit()).isEqualTo(2);
        assertThat(capped.err())
                .startsWith("gpumem compare: no device capacity runs these requests")
                .contains("rmm-pool's max");
        CliRun bad = CliRun.run("compare", f.toString(), "--policy", "rmm-pool:initial=100");
        assertThat(bad.exit()).isEqualTo(2);
        assertThat(bad.err())
                .isEqualTo("gpumem compare: bad --policy: policy rmm-pool: initial must be a multiple of 256 bytes,"
                        + " got 100\n");
    }

    @Test
    void unknownPolicyIsBadInput() {
        var f = TraceCommandsTest.trace("tiny-forward.pickle");
        CliRun r = CliRun.run("compare", f.toString(), "--policy", "bestfit");
        assertThat(r.exit()).isEqualTo(2);
        assertThat(r.err()).startsWith("gpumem compare: bad --policy: unknown policy 'bestfit'");
        r = CliRun.run("compare", f.toString(), "--policy", "stitch:fast");
        assertThat(r.exit()).isEqualTo(2);
        assertThat(r.err()).contains("takes no options");
    }
}
