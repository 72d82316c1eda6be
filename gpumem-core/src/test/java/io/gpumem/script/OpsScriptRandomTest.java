package io.gpumem.script;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.fail;

import java.util.SplittableRandom;
import org.junit.jupiter.api.Test;

/** Seeded random scripts: whatever the words, parsing succeeds or fails with a ScriptException naming a real line. */
class OpsScriptRandomTest {

    @Test
    void randomScriptsParseOrFailWithALineNumber() {
        long seed = System.nanoTime();
        System.out.println("OpsScriptRandomTest seed=" + seed);
        SplittableRandom rnd = new SplittableRandom(seed);
        String[] words = {
            "device",
            "config",
            "alloc",
            "free",
            "record_stream",
            "complete_events",
            "empty_cache",
            "set_fraction",
            "reset_peak",
            "summary",
            "stats",
            "abbreviated",
            "a",
            "b",
            "c",
            "1000",
            "3MiB",
            "0",
            "stream=1",
            "stream=x",
            "capacity=1GiB",
            "held=2GiB",
            "granularity=2MiB",
            "0.5",
            "2",
            "#",
            "expandable_segments:True",
            "max_split_size_mb:10",
            "3MB",
            "-1",
            "=",
            "\t"
        };
        int parsed = 0;
        for (int iter = 0; iter < 5000; iter++) {
            StringBuilder sb = new StringBuilder();
            int lines = 1 + rnd.nextInt(8);
            for (int l = 0; l < lines; l++) {
                int n = rnd.nextInt(5);
                for (int k = 0; k < n; k++) {
                    sb.append(k == 0 ? "" : " ").append(words[rnd.nextInt(words.length)]);
                }
                sb.append('\n');
            }
            String script = sb.toString();
            try {
                OpsScript s = OpsScript.parse(script);
                parsed++;
                for (ScriptOp op : s.ops()) {
                    assertThat(op.line()).isBetween(1, lines);
                }
            } catch (ScriptException e) {
                assertThat(e.line()).as(script).isBetween(1, lines);
                assertThat(e.detail()).as(script).isNotBlank();
            } catch (RuntimeException e) {
                fail("seed " + seed + ": script threw " + e + ":\n" + script, e);
            }
        }
        assertThat(parsed).isPositive();
    }
}
