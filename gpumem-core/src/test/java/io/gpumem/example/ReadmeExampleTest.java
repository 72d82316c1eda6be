package io.gpumem.example;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpumem.alloc.CachingAllocator;
import io.gpumem.config.AllocatorConfig;
import io.gpumem.device.Device;
import io.gpumem.device.SimulatedDevice;
import io.gpumem.stats.MemoryStats;
import io.gpumem.stats.StatKind;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/**
 * Keeps the README's Java example honest: {@link #example} is the README's first {@code java} block, line for
 * line, so it compiles against the public API (this package is outside every main package, so only public
 * types can be used) and runs here. When the API changes, this file stops compiling; when the README
 * changes, {@link #theReadmeShowsThisExample} fails and prints the block the README holds.
 */
class ReadmeExampleTest {

    private static final String BEGIN = "// README example begin";
    private static final String END = "// README example end";

    static void example() {
        // README example begin
        try (Device gpu = SimulatedDevice.builder().capacity(80L << 30).build(); // or CudaDevice.open()
                var a = new CachingAllocator(gpu, AllocatorConfig.parse("expandable_segments:True"))) {
            long side = gpu.createStream(); // any stream handle the device knows
            long p = a.malloc(25_000_000); // stream 0; throws io.gpumem.oom.OutOfMemoryException
            long q = a.malloc(4096, side);
            a.recordStream(p, side); // Tensor.record_stream
            a.free(p); // reusable once side's queued work completes
            a.free(q);
            a.emptyCache(); // torch.cuda.empty_cache()
            MemoryStats stats = a.stats(); // torch.cuda.memory_stats(), typed
            long peak = stats.get(StatKind.RESERVED_BYTES).peak();
            Map<String, Long> keys = stats.toPyTorchMap(); // PyTorch's dotted keys, sorted
            System.out.println("peak reserved " + peak + " B, " + keys.get("num_alloc_retries") + " retries");
            System.out.print(a.memorySummary(false)); // torch.cuda.memory_summary()
        }
        // README example end
    }

    @Test
    void theReadmeShowsThisExample() throws IOException {
        Path module = Path.of("").toAbsolutePath();
        String readme = Files.readString(module.resolveSibling("README.md"));
        String source = Files.readString(module.resolve("src/test/java/io/gpumem/example/ReadmeExampleTest.java"));

        int open = readme.indexOf("```java\n");
        assertThat(open).as("README.md has a ```java block").isNotNegative();
        String inReadme = readme.substring(open + "```java\n".length(), readme.indexOf("```", open + 7));

        int from = source.indexOf(BEGIN + "\n") + BEGIN.length() + 1;
        String body = source.substring(from, source.lastIndexOf('\n', source.indexOf(END, from)) + 1);
        String inTest =
                body.lines().map(l -> l.strip().isEmpty() ? "" : l.substring(8)).reduce("", (x, l) -> x + l + "\n");
        assertThat(inReadme)
                .as("README.md's Java example, compared with ReadmeExampleTest.example()")
                .isEqualTo(inTest);
    }

    @Test
    void theExampleRuns() {
        PrintStream out = System.out;
        ByteArrayOutputStream printed = new ByteArrayOutputStream();
        try {
            System.setOut(new PrintStream(printed, true, StandardCharsets.UTF_8));
            example();
        } finally {
            System.setOut(out);
        }
        List<String> summary = List.of(printed.toString(StandardCharsets.UTF_8).split("\n"));
        assertThat(summary).anyMatch(l -> l.contains("PyTorch CUDA memory summary, device ID 0"));
        assertThat(summary).anyMatch(l -> l.matches("peak reserved [1-9][0-9]* B, 0 retries"));
        // both blocks were freed and emptyCache gave every page back: nothing allocated or reserved now, but the
        // reserved peak shows the pages the two requests mapped
        assertThat(row(summary, "| Allocated memory ")).startsWith("0 B");
        String reserved = row(summary, "| GPU reserved memory ");
        assertThat(reserved).startsWith("0 B");
        assertThat(reserved.split("\\|", -1)[1].strip()).isNotEqualTo("0 B");
    }

    /** The cells after the label of the first summary row starting with {@code label}, e.g. "0 B | 42 MiB | ...". */
    private static String row(List<String> summary, String label) {
        String line =
                summary.stream().filter(l -> l.startsWith(label)).findFirst().orElseThrow();
        return line.substring(line.indexOf('|', 1) + 1).strip();
    }
}
