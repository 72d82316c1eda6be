package io.gpumem.trace.analysis;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.gpumem.engine.RunOutcome;
import io.gpumem.policy.PolicySpec;
import io.gpumem.trace.replay.ProgressListener;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * {@link MemoisedWhatIf#prefetch}: runs start longest first (the {@code max_split_size_mb} configurations), yet each
 * outcome, or failure, goes back to the key it was run for.
 */
class MemoisedWhatIfTest {

    @Test
    void configurationsThatLimitSplitsStartFirstAndTheRestKeepTheirOrder() {
        List<String> confs = List.of(
                "", "expandable_segments:True", "max_split_size_mb:128", "not_a_key:1", "max_split_size_mb:512");
        assertThat(MemoisedWhatIf.longestFirst(confs, 2)).containsExactly(2, 4, 0, 1, 3, 5, 6);
        assertThat(MemoisedWhatIf.longestFirst(List.of(), 1)).containsExactly(0);
    }

    @Test
    void eachOutcomeGoesBackToItsKeyWhateverOrderTheRunsStartIn() {
        List<String> started = Collections.synchronizedList(new ArrayList<>());
        MemoisedWhatIf whatIf = new MemoisedWhatIf(ProgressListener.NONE) {
            @Override
            protected RunOutcome evaluate(String conf) {
                started.add(conf);
                if (conf.equals("fails")) {
                    throw new IllegalArgumentException("no such configuration");
                }
                return RunOutcome.builder()
                        .capacity(1)
                        .minCapacity(conf.length())
                        .build();
            }

            @Override
            protected RunOutcome evaluate(PolicySpec policy) {
                throw new AssertionError("no policy asked for");
            }

            @Override
            public String description() {
                return "a table";
            }
        };
        List<String> confs = List.of("", "fails", "max_split_size_mb:128", "expandable_segments:True");
        whatIf.prefetch(confs, List.of());
        assertThat(started).containsExactlyInAnyOrderElementsOf(confs);
        for (String conf : List.of("", "max_split_size_mb:128", "expandable_segments:True")) {
            assertThat(whatIf.run(conf).minCapacity()).as(conf).isEqualTo(conf.length());
        }
        assertThatThrownBy(() -> whatIf.run("fails")).hasMessage("no such configuration");
        assertThat(started).as("each run once, the later calls memoised").hasSize(4);
    }
}
