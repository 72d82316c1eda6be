package io.gpumem.kvcache.sim;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.gpumem.kvcache.KvCacheException;
import io.gpumem.kvcache.hash.HashAlgorithm;
import io.gpumem.kvcache.manager.PreemptionMode;
import io.gpumem.kvcache.sched.VictimPolicy;
import org.junit.jupiter.api.Test;

/** The validating builder: defaults, derived variants, the sub-configurations it builds, and its error messages. */
class SimConfigTest {

    @Test
    void theBuilderCarriesEverySettingIntoTheCacheAndSchedulerConfigurations() {
        SimConfig c = SimConfig.builder()
                .seed(9)
                .prefixCaching(false)
                .hashAlgorithm(HashAlgorithm.SHA256)
                .watermark(0.25)
                .swapSpaceBytes(1 << 20)
                .tokenBudget(512)
                .maxRunning(7)
                .preemption(PreemptionMode.SWAP)
                .victimPolicy(VictimPolicy.PRIORITY)
                .lookahead(3)
                .build();
        assertThat(c.cache().prefixCaching()).isFalse();
        assertThat(c.cache().hashAlgorithm()).isEqualTo(HashAlgorithm.SHA256);
        assertThat(c.cache().hashSeed()).isEqualTo(9);
        assertThat(c.cache().watermark()).isEqualTo(0.25);
        assertThat(c.cache().swapSpaceBytes()).isEqualTo(1 << 20);
        assertThat(c.scheduler().tokenBudget()).isEqualTo(512);
        assertThat(c.scheduler().maxRunning()).isEqualTo(7);
        assertThat(c.scheduler().preemption()).isEqualTo(PreemptionMode.SWAP);
        assertThat(c.scheduler().victimPolicy()).isEqualTo(VictimPolicy.PRIORITY);
        assertThat(c.scheduler().lookahead()).isEqualTo(3);

        SimConfig variant = c.toBuilder().seed(10).blocks(300).build();
        assertThat(variant.seed()).isEqualTo(10);
        assertThat(variant.cache().hashSeed()).isEqualTo(10);
        assertThat(variant.cache())
                .usingRecursiveComparison()
                .ignoringFields("hashSeed")
                .isEqualTo(c.cache());
        assertThat(variant.scheduler()).isEqualTo(c.scheduler());
        assertThat(variant.spec().numBlocks()).isEqualTo(300);
    }

    @Test
    void badSettingsAreRefusedNamingTheSettingOrTheCallersNameForIt() {
        assertThatThrownBy(() -> SimConfig.builder().blockSize(0).build())
                .isInstanceOf(KvCacheException.class)
                .hasMessage("blockSize must be positive, got 0");
        assertThatThrownBy(() -> SimConfig.builder()
                        .blockSize(0)
                        .settingNames(n -> "--" + n)
                        .build())
                .hasMessage("--blockSize must be positive, got 0");
        assertThatThrownBy(() -> SimConfig.builder()
                        .arrivalRate(Double.POSITIVE_INFINITY)
                        .build())
                .hasMessage("arrivalRate must be a positive number, got Infinity");
        assertThatThrownBy(() -> SimConfig.builder().blocks(10).build())
                .hasMessageStartingWith("blocks 10 of blockSize 16 hold 144 tokens, less than one request of"
                        + " maxModelLen 2048; use at least 129 blocks");
        assertThatThrownBy(() ->
                        SimConfig.builder().requests(SimConfig.MAX_REQUESTS + 1).build())
                .hasMessageContaining("over the limit of " + SimConfig.MAX_REQUESTS);
        // each negative setting is named alone, with its value
        assertThatThrownBy(() -> SimConfig.builder().prefixTokens(-5).build())
                .isInstanceOf(KvCacheException.class)
                .hasMessage("prefixTokens must not be negative, got -5");
        assertThatThrownBy(() -> SimConfig.builder().lookahead(-1).build())
                .hasMessage("lookahead must not be negative, got -1");
        assertThatThrownBy(() -> SimConfig.builder().swapSpaceBytes(-2).build())
                .hasMessage("swapSpaceBytes must not be negative, got -2");
        // within the device limit but past the int token range: named by the caller's flags, with the limit
        assertThatThrownBy(() -> SimConfig.builder()
                        .blocks(200_000_000)
                        .maxModelLen(16)
                        .settingNames(n -> "--" + n)
                        .build())
                .isInstanceOf(KvCacheException.class)
                .hasMessage("--blocks 200000000 of --blockSize 16 hold 3200000000 tokens, over the limit of 2147483647"
                        + " tokens; use at most 134217727 blocks");
        assertThatThrownBy(() -> SimConfig.builder()
                        .blocks(3)
                        .blockSize(1 << 30)
                        .layers(1)
                        .kvHeads(1)
                        .headSize(1)
                        .maxModelLen(16)
                        .build())
                .hasMessageStartingWith("blocks 3 of blockSize 1073741824 hold 3221225472 tokens");
        assertThatThrownBy(() -> SimConfig.builder()
                        .blocks(Integer.MAX_VALUE)
                        .layers(SimConfig.MAX_LAYERS)
                        .build())
                .hasMessageContaining("over the simulated device's limit");
        assertThatThrownBy(() -> SimConfig.builder()
                        .workload(Workload.SHARED_PREFIX)
                        .prefixTokens(2046)
                        .build())
                .hasMessage("prefixTokens 2046 leaves no room under maxModelLen 2048");
        assertThatThrownBy(() -> SimConfig.builder()
                        .workload(Workload.CHAT)
                        .maxModelLen(66)
                        .build())
                .hasMessage("maxModelLen 66 leaves no room after the chat workload's 64-token system prompt; use at"
                        + " least 67");
        assertThat(SimConfig.builder()
                        .workload(Workload.CHAT)
                        .maxModelLen(67)
                        .build()
                        .spec()
                        .maxModelLen())
                .isEqualTo(67);
        assertThatThrownBy(() -> SimConfig.builder().watermark(1).build()).hasMessageStartingWith("watermark");
        assertThatThrownBy(() -> SimConfig.builder().preemption(null).build())
                .isInstanceOf(NullPointerException.class)
                .hasMessage("preemption");
    }
}
