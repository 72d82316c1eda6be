package io.gpumem.cli.kv;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpumem.cli.CliRun;
import java.net.ServerSocket;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.time.Duration;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Test;

/**
 * {@code kv-sim --metrics-port}: while serving runs, Prometheus can scrape 127.0.0.1; the final scrape (during
 * {@code --metrics-linger}) carries the figures the run prints.
 */
class KvSimMetricsTest {
    private static final Pattern SAMPLE = Pattern.compile("([a-zA-Z_:][a-zA-Z0-9_:]*)(\\{[^}]*\\})? (\\S+)");

    /** Samples by {@code name{labels}}; fails on any line that is not a comment or a sample. */
    static Map<String, Double> parse(String body) {
        Map<String, Double> out = new LinkedHashMap<>();
        for (String line : body.lines().toList()) {
            if (line.isEmpty() || line.startsWith("# HELP ") || line.startsWith("# TYPE ")) {
                continue;
            }
            Matcher m = SAMPLE.matcher(line);
            assertThat(m.matches()).as("exposition line '%s'", line).isTrue();
            out.put(m.group(1) + (m.group(2) == null ? "" : m.group(2)), Double.parseDouble(m.group(3)));
        }
        return out;
    }

    /** The one sample of {@code name} whose labels include all of {@code labels}. */
    static double sample(Map<String, Double> samples, String name, String... labels) {
        List<Double> found = samples.entrySet().stream()
                .filter(e -> e.getKey().startsWith(name + "{")
                        && java.util.Arrays.stream(labels).allMatch(e.getKey()::contains))
                .map(Map.Entry::getValue)
                .toList();
        assertThat(found)
                .as("samples of %s with %s in %s", name, List.of(labels), samples.keySet())
                .hasSize(1);
        return found.getFirst();
    }

    @Test
    void scrapesLiveFiguresThatEndAtThePrintedOnes() throws Exception {
        int port;
        try (ServerSocket probe = new ServerSocket(0)) {
            port = probe.getLocalPort();
        }
        AtomicReference<CliRun> result = new AtomicReference<>();
        Thread sim = new Thread(() -> result.set(CliRun.run(
                "kv-sim",
                "--requests",
                "400",
                "--blocks",
                "300",
                "--seed",
                "7",
                "--metrics-port",
                Integer.toString(port),
                "--metrics-linger",
                "60")));
        sim.start();
        HttpClient client =
                HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(2)).build();
        HttpRequest scrape = HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + port + "/metrics"))
                .build();
        Map<String, Double> last = null;
        int scrapes = 0;
        long deadline = System.nanoTime() + Duration.ofMinutes(2).toNanos();
        while (System.nanoTime() < deadline) {
            try {
                HttpResponse<String> r = client.send(scrape, HttpResponse.BodyHandlers.ofString());
                assertThat(r.statusCode()).isEqualTo(200);
                Map<String, Double> s = parse(r.body());
                scrapes++;
                if (last != null) {
                    assertThat(s.get("gpumem_kv_sim_steps"))
                            .as("steps never go back")
                            .isGreaterThanOrEqualTo(last.get("gpumem_kv_sim_steps"));
                }
                last = s;
                if (s.get("gpumem_kv_sim_running") == 0.0) {
                    // The binders serve one stats read to every meter for 100 ms (ScrapedStats.REUSE_NANOS,
                    // so that a scrape is one consistent snapshot), and the scrape that saw running drop to 0 may
                    // have reused a read from just before the final publish. The final figures are published
                    // before running drops, so a scrape taken after that window reads them all.
                    Thread.sleep(250);
                    last = parse(client.send(scrape, HttpResponse.BodyHandlers.ofString())
                            .body());
                    scrapes++;
                    break;
                }
            } catch (java.net.ConnectException notYet) {
                assertThat(sim.isAlive()).as("kv-sim still starting").isTrue();
            }
            Thread.sleep(20);
        }
        assertThat(last).as("a scrape answered").isNotNull();
        assertThat(last.get("gpumem_kv_sim_running"))
                .as("the run finished while serving")
                .isEqualTo(0.0);
        sim.interrupt(); // ends the linger
        sim.join(30_000);
        CliRun run = result.get();
        assertThat(run.exit()).as(run.err()).isZero();
        assertThat(run.err()).contains("kv-sim: metrics at http://127.0.0.1:" + port + "/metrics");
        Matcher printed = Pattern.compile("preemptions\\s+(\\d+) \\(recompute (\\d+), swap (\\d+)\\)")
                .matcher(run.out());
        assertThat(printed.find()).as(run.out()).isTrue();
        assertThat(sample(last, "gpumem_kv_preemptions_total", "mode=\"recompute\"", "instance=\"0\""))
                .isEqualTo(Double.parseDouble(printed.group(2)));
        Matcher steps = Pattern.compile("steps\\s+(\\d+)").matcher(run.out());
        assertThat(steps.find()).isTrue();
        assertThat(last.get("gpumem_kv_sim_steps")).isEqualTo(Double.parseDouble(steps.group(1)));
        assertThat(last.keySet()).anyMatch(k -> k.startsWith("gpumem_allocator_reserved_bytes{"));
        System.out.println("kv-sim metrics: " + scrapes + " scrapes over HTTP, last at "
                + last.get("gpumem_kv_sim_steps") + " steps");
    }

    @Test
    void aFreshProcessServingMetricsWritesNothingToStandardErrorButWhatGpumemSays() throws Exception {
        // In its own JVM: SLF4J complains once per process, when the first logger is made, and other tests of this
        // one may have made it already. Without a binding on the class path it printed three lines about
        // StaticLoggerBinder before kv-sim's first line.
        Path java = Path.of(System.getProperty("java.home"), "bin", "java");
        Process p = new ProcessBuilder(
                        java.toString(),
                        "-cp",
                        System.getProperty("java.class.path"),
                        "io.gpumem.cli.GpumemCli",
                        "kv-sim",
                        "--requests",
                        "5",
                        "--blocks",
                        "256",
                        "--metrics-port",
                        "0")
                .redirectOutput(ProcessBuilder.Redirect.DISCARD)
                .start();
        String err = new String(p.getErrorStream().readAllBytes(), StandardCharsets.UTF_8);
        assertThat(p.waitFor(60, TimeUnit.SECONDS)).isTrue();
        assertThat(p.exitValue()).as(err).isZero();
        assertThat(err).as("standard error").doesNotContain("SLF4J");
    }
}
