package io.gpumem.cli.kv;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpumem.cli.CliRun;
import java.util.ArrayList;
import java.util.List;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Test;

class KvSimCommandTest {

    private static CliRun run(String... args) {
        return CliRun.run(args);
    }

    private static String withoutTiming(String json) {
        return json.replaceAll("\"pool_ns_per_step\":[0-9.Ee+-]+", "");
    }

    @Test
    void jsonHasEveryRequiredFieldAndIsDeterministic() {
        String[] args = {
            "kv-sim", "--workload", "sharegpt", "--seed", "11", "--requests", "120", "--blocks", "400", "--json"
        };
        CliRun a = run(args);
        CliRun b = run(args);
        assertThat(a.exit()).as(a.err()).isZero();
        for (String key : List.of(
                "requests_finished",
                "tokens_per_step",
                "preemptions",
                "prefix_hit_rate",
                "kv_waste",
                "pool_ns_per_step")) {
            assertThat(a.out()).contains("\"" + key + "\":");
        }
        assertThat(a.out()).contains("\"requests_finished\":120", "\"requests_not_arrived\":0");
        assertThat(a.out().strip()).startsWith("{").endsWith("}");
        assertThat(withoutTiming(a.out())).isEqualTo(withoutTiming(b.out()));
    }

    @Test
    void jsonEchoesTheVictimPolicyAsTheTextHeaderDoes() {
        CliRun r = run("kv-sim", "--requests", "5", "--victim", "least-computed", "--json");
        assertThat(r.exit()).as(r.err()).isZero();
        assertThat(r.out()).contains("\"preemption\":\"recompute\",\"victim\":\"least-computed\"");
    }

    @Test
    void textReportNamesTheFiguresForEachWorkloadAndMode() {
        List<String[]> variants = new ArrayList<>();
        variants.add(new String[] {"kv-sim", "--workload", "alpaca", "--requests", "50"});
        variants.add(
                new String[] {"kv-sim", "--workload", "shared-prefix", "--requests", "50", "--prefix-caching", "off"});
        variants.add(new String[] {
            "kv-sim", "--workload", "chat", "--requests", "10", "--preemption", "swap", "--blocks", "300"
        });
        variants.add(new String[] {
            "kv-sim", "--requests", "30", "--memory", "direct", "--victim", "least-computed", "--hash", "sha256"
        });
        variants.add(new String[] {
            "kv-sim", "--requests", "80", "--blocks", "200", "--victim", "priority", "--priority-levels", "4"
        });
        for (String[] v : variants) {
            CliRun r = run(v);
            assertThat(r.exit()).as(String.join(" ", v) + r.err()).isZero();
            assertThat(r.out())
                    .contains(
                            "requests finished",
                            "tokens per step",
                            "preemptions",
                            "prefix hit rate",
                            "KV waste",
                            "block-pool time");
        }
    }

    @Test
    void swapSpaceTakesASizeAsTheOtherMemoryOptionsDo() {
        String[] common = {"kv-sim", "--requests", "40", "--preemption", "swap", "--blocks", "150", "--json"};
        String inBytes = swapFigures(run(with(common, "--swap-space", "65536")));
        assertThat(swapFigures(run(with(common, "--swap-space", "64KiB")))).isEqualTo(inBytes);
        assertThat(inBytes).as("some victims swapped, some recomputed").contains("\"swap_preemptions\":16");
        assertThat(swapFigures(run(with(common, "--swap-space", "0"))))
                .as("no swap space: every victim recomputed")
                .contains("\"swap_preemptions\":0");
    }

    /** The deterministic swap figures of a {@code --json} run (the timings vary from run to run). */
    private static String swapFigures(CliRun r) {
        assertThat(r.exit()).as(r.err()).isZero();
        StringBuilder figures = new StringBuilder();
        for (String key : List.of("recompute_preemptions", "swap_preemptions", "swap_out_bytes")) {
            Matcher m = Pattern.compile("\"" + key + "\":\\d+").matcher(r.out());
            assertThat(m.find()).as(key + " in " + r.out()).isTrue();
            figures.append(m.group()).append(' ');
        }
        return figures.toString();
    }

    private static String[] with(String[] base, String... more) {
        String[] all = java.util.Arrays.copyOf(base, base.length + more.length);
        System.arraycopy(more, 0, all, base.length, more.length);
        return all;
    }

    @Test
    void badOptionsNameTheOptionAndExitWithTwo() {
        CliRun r = run("kv-sim", "--workload", "reddit");
        assertThat(r.exit()).isEqualTo(2);
        assertThat(r.err()).contains("--workload").contains("reddit");
        r = run("kv-sim", "--blocks", "10");
        assertThat(r.exit()).isEqualTo(2);
        assertThat(r.err()).contains("--blocks 10").contains("less than one request");
        r = run("kv-sim", "--prefix-caching", "maybe");
        assertThat(r.exit()).isEqualTo(2);
        assertThat(r.err()).contains("--prefix-caching");
        r = run("kv-sim", "--preemption", "drop");
        assertThat(r.exit()).isEqualTo(2);
        assertThat(r.err()).contains("--preemption");
        r = run("kv-sim", "--memory", "disk");
        assertThat(r.exit()).isEqualTo(2);
        assertThat(r.err()).contains("--memory");
        r = run("kv-sim", "--rate", "0");
        assertThat(r.exit()).isEqualTo(2);
        assertThat(r.err()).contains("--rate must be a positive number, got 0.0");
        // the library's builder checks these; the command names its own flags in the messages
        r = run("kv-sim", "--block-size", "0");
        assertThat(r.exit()).isEqualTo(2);
        assertThat(r.err()).contains("--block-size must be positive, got 0");
        r = run("kv-sim", "--swap-space", "-1");
        assertThat(r.exit()).isEqualTo(2);
        assertThat(r.err()).contains("Invalid value for option '--swap-space': '-1' is not a size");
        r = run("kv-sim", "--lookahead", "-1");
        assertThat(r.exit()).isEqualTo(2);
        assertThat(r.err()).contains("--lookahead must not be negative, got -1").doesNotContain("--swap-space");
        r = run("kv-sim", "--prefix-tokens", "-5");
        assertThat(r.exit()).isEqualTo(2);
        assertThat(r.err())
                .contains("--prefix-tokens must not be negative, got -5")
                .doesNotContain("--lookahead");
        r = run("kv-sim", "--workload", "chat", "--max-model-len", "32");
        assertThat(r.exit())
                .as("refused before the run, not by its first request")
                .isEqualTo(2);
        assertThat(r.err())
                .contains("--max-model-len 32 leaves no room after the chat workload's 64-token system prompt")
                .doesNotContain("request r0");
        r = run("kv-sim", "--layers", "2000");
        assertThat(r.exit()).isEqualTo(2);
        assertThat(r.err()).contains("--layers 2000 is over the limit of 1024");
        r = run("kv-sim", "--model", "llama 3");
        assertThat(r.exit()).isEqualTo(2);
        assertThat(r.err())
                .contains("--model: model name must be letters, digits and . _ - /")
                .contains("'llama 3'");
        for (String tier : List.of("--host-tier", "--disk-tier", "--remote")) {
            String value = tier.equals("--remote") ? "memory:1MiB" : "1MiB";
            r = run("kv-sim", "--prefix-caching", "off", tier, value, "--requests", "5");
            assertThat(r.exit()).as(tier + " without prefix caching").isEqualTo(2);
            assertThat(r.err()).contains("--host-tier, --disk-tier and --remote need --prefix-caching on");
            assertThat(r.out()).as("refused before the run").isEmpty();
        }
    }

    @Test
    void stoppingEarlyExitsWithOne() {
        CliRun r = run("kv-sim", "--requests", "50", "--max-steps", "10", "--json");
        assertThat(r.exit()).isEqualTo(1);
        assertThat(r.out()).contains("\"steps\":10");
    }

    private static double number(String json, String key) {
        java.util.regex.Matcher m =
                java.util.regex.Pattern.compile("\"" + key + "\":([0-9.Ee+-]+)").matcher(json);
        assertThat(m.find()).as(key + " in " + json).isTrue();
        return Double.parseDouble(m.group(1));
    }

    @Test
    void aHostTierRaisesTheHitRateAndCutsRecomputation() {
        String[] base = {"kv-sim", "--workload", "chat", "--requests", "60", "--blocks", "160", "--json"};
        CliRun without = run(base);
        String[] withTier = java.util.Arrays.copyOf(base, base.length + 2);
        withTier[base.length] = "--host-tier";
        withTier[base.length + 1] = "16MiB";
        CliRun with = run(withTier);
        assertThat(with.exit()).as(with.err()).isZero();
        for (String key :
                List.of("ttft_ms_mean", "ttft_ms_p50", "ttft_ms_p99", "output_tokens_per_s", "recomputed_tokens")) {
            assertThat(with.out()).contains("\"" + key + "\":");
        }
        assertThat(with.out()).contains("\"tiers\":{\"host\":{\"hits\":");
        assertThat(without.out()).contains("\"tiers\":{}");
        assertThat(number(with.out(), "prefix_hit_rate")).isGreaterThan(number(without.out(), "prefix_hit_rate"));
        assertThat(number(with.out(), "recomputed_tokens")).isLessThan(number(without.out(), "recomputed_tokens"));
        assertThat(number(with.out(), "bytes_in")).isPositive();
        assertThat(number(with.out(), "bytes_out")).isPositive();
    }

    @Test
    void instancesSharingAStoreHitWhatTheOthersComputed() {
        CliRun r = run(
                "kv-sim",
                "--workload",
                "chat",
                "--requests",
                "40",
                "--blocks",
                "160",
                "--instances",
                "2",
                "--remote",
                "memory:64MiB",
                "--json");
        assertThat(r.exit()).as(r.err()).isZero();
        String instances = r.out().substring(r.out().indexOf("\"instances\":["));
        int second = instances.indexOf("},{\"requests_total\"");
        assertThat(second).isPositive();
        assertThat(number(instances.substring(second), "hits"))
                .as("instance 1's remote hits")
                .isPositive();
        CliRun text = run(
                "kv-sim",
                "--workload",
                "chat",
                "--requests",
                "10",
                "--blocks",
                "160",
                "--instances",
                "2",
                "--remote",
                "memory:64MiB",
                "--host-tier",
                "1MiB",
                "--disk-tier",
                "4MiB");
        assertThat(text.exit()).as(text.err()).isZero();
        assertThat(text.out()).contains("time to first token", "host tier", "disk tier", "remote tier", "instance 1");
    }

    @Test
    void badTierOptionsNameTheOptionAndExitWithTwo() {
        CliRun r = run("kv-sim", "--remote", "ftp://x");
        assertThat(r.exit()).isEqualTo(2);
        assertThat(r.err()).contains("--remote");
        r = run("kv-sim", "--host-tier", "2GB");
        assertThat(r.exit()).isEqualTo(2);
        assertThat(r.err()).contains("--host-tier");
        r = run("kv-sim", "--instances", "0");
        assertThat(r.exit()).isEqualTo(2);
        assertThat(r.err()).contains("--instances");
        r = run("kv-sim", "--instances", "100000", "--requests", "5");
        assertThat(r.exit()).isEqualTo(2);
        assertThat(r.err()).contains("--instances 100000 is over the limit of 1024");
        r = run("kv-sim", "--host-tier", "1MiB", "--tier-queue-blocks", "2147483647");
        assertThat(r.exit()).isEqualTo(2);
        assertThat(r.err()).contains("--tier-queue-blocks 2147483647 is over the limit of 1048576");
        r = run("kv-sim", "--max-model-len", "2147483647");
        assertThat(r.exit()).isEqualTo(2);
        assertThat(r.err()).contains("use at least 134217729 blocks");
        r = run("kv-sim", "--time-host-gbps", "0");
        assertThat(r.exit()).isEqualTo(2);
        assertThat(r.err()).contains("gpumem kv-sim: --time-host-gbps must be a positive number, got 0.0");
        // every time flag is named when its value is refused
        for (String flag : new String[] {
            "--time-weight-bytes",
            "--time-kv-bytes-per-token",
            "--time-prefill-us",
            "--time-decode-us",
            "--time-hbm-gbps",
            "--time-host-gbps",
            "--time-disk-gbps",
            "--time-disk-latency-us",
            "--time-net-gbps",
            "--time-net-latency-us"
        }) {
            r = run("kv-sim", flag, "-3");
            assertThat(r.exit()).as(flag).isEqualTo(2);
            assertThat(r.err()).as(flag).startsWith("gpumem kv-sim: " + flag + " must be ");
        }
    }

    @Test
    void aRunThatMaxStepsStopsSaysSoAndExitsOneEvenBeforeTheFirstArrival() {
        CliRun cut = run("kv-sim", "--requests", "50", "--max-steps", "40");
        assertThat(cut.exit()).as(cut.err()).isEqualTo(1);
        assertThat(cut.out())
                .containsPattern("requests finished +\\d+ / \\d+ \\(\\d+ more had not arrived when"
                        + " --max-steps 40 stopped the run\\)");
        CliRun none = run("kv-sim", "--requests", "5", "--max-steps", "1", "--json");
        assertThat(none.exit())
                .as("no request finished, none was left running: still not the whole workload")
                .isEqualTo(1);
        assertThat(none.out()).contains("\"requests_finished\":0").containsPattern("\"requests_not_arrived\":[1-5]");
    }
}
