package io.gpumem.config;

import static io.gpumem.testing.TestSizes.GiB;
import static io.gpumem.testing.TestSizes.MiB;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import org.junit.jupiter.api.Nested;
import org.junit.jupiter.api.Test;

class AllocatorConfigParserTest {

    private static void assertRejected(String conf, String key, String messagePart) {
        assertThatThrownBy(() -> AllocatorConfig.parse(conf))
                .isInstanceOf(ConfigException.class)
                .hasMessageContaining(messagePart)
                .hasMessageContaining(key)
                .satisfies(e -> assertThat(((ConfigException) e).key()).isEqualTo(key));
    }

    @Nested
    class Lexer {
        @Test
        void punctuationIsTokensAndSpacesAreDropped() {
            assertThat(ConfigLexer.lex(" max_split_size_mb : 128 ,roundup_power2_divisions:[256:1, >:8]"))
                    .containsExactly(
                            "max_split_size_mb",
                            ":",
                            "128",
                            ",",
                            "roundup_power2_divisions",
                            ":",
                            "[",
                            "256",
                            ":",
                            "1",
                            ",",
                            ">",
                            ":",
                            "8",
                            "]");
        }

        @Test
        void spacesInsideAWordJoinIt() {
            assertThat(ConfigLexer.lex("expandable _segments:Tr ue"))
                    .containsExactly("expandable_segments", ":", "True");
        }

        @Test
        void emptyAndBlankGiveNoTokens() {
            assertThat(ConfigLexer.lex("")).isEmpty();
            assertThat(ConfigLexer.lex("   ")).isEmpty();
        }
    }

    @Nested
    class Defaults {
        @Test
        void emptyStringIsDefaults() {
            AllocatorConfig c = AllocatorConfig.parse("");
            assertThat(c.maxSplitSize()).isEqualTo(AllocatorConfig.UNLIMITED);
            assertThat(c.maxSplitSizeReported()).isEqualTo(-1);
            assertThat(c.roundupPower2DivisionsTable()).containsOnly(0);
            assertThat(c.garbageCollectionThreshold()).isZero();
            assertThat(c.expandableSegments()).isFalse();
            assertThat(c.backend()).isEqualTo("native");
            assertThat(c.maxNonSplitRounding()).isEqualTo(20 * MiB);
            assertThat(c.pinnedNumRegisterThreads()).isEqualTo(1);
            assertThat(c).isEqualTo(AllocatorConfig.defaults());
        }

        @Test
        void rawKeepsTheString() {
            assertThat(AllocatorConfig.parse("expandable_segments:True").raw()).isEqualTo("expandable_segments:True");
        }
    }

    @Nested
    class Options {
        @Test
        void maxSplitSizeIsMegabytes() {
            assertThat(AllocatorConfig.parse("max_split_size_mb:128").maxSplitSize())
                    .isEqualTo(128 * MiB);
            assertThat(AllocatorConfig.parse("max_split_size_mb:21").maxSplitSize())
                    .isEqualTo(21 * MiB);
            assertThat(AllocatorConfig.parse("max_split_size_mb:21").maxSplitSizeReported())
                    .isEqualTo(21 * MiB);
        }

        @Test
        void maxSplitSizeLargestIntFitsInALong() {
            assertThat(AllocatorConfig.parse("max_split_size_mb:2147483647").maxSplitSize())
                    .isEqualTo(2147483647L * MiB);
        }

        @Test
        void negativeMaxSplitSizeWrapsAsPyTorchsSizeTDoes() {
            // size_t val1 = stoi("-5") is 2^64 - 5: it passes "> 20" and is clamped to SIZE_MAX / MiB MiB
            for (String v : new String[] {"-5", "-1", "-2147483648"}) {
                AllocatorConfig c = AllocatorConfig.parse("max_split_size_mb:" + v);
                assertThat(c.maxSplitSize()).isEqualTo(AllocatorConfig.NEGATIVE_MAX_SPLIT_SIZE);
                assertThat(c.maxSplitSizeReported()).isEqualTo(-MiB); // (int64) (2^64 - 1 MiB)
                assertThat(c.toConfString()).isEqualTo("max_split_size_mb:-1");
            }
            // larger than any block, so nothing is oversize
            assertThat(AllocatorConfig.NEGATIVE_MAX_SPLIT_SIZE)
                    .isGreaterThan(1L << 62)
                    .isEqualTo((Long.MAX_VALUE >> 20) << 20);
        }

        @Test
        void numbersSkipLeadingWhiteSpaceAsStoiAndStodDo() {
            assertThat(AllocatorConfig.parse("max_split_size_mb:\t128").maxSplitSize())
                    .isEqualTo(128 * MiB);
            assertThat(AllocatorConfig.parse("garbage_collection_threshold:\n0.5")
                            .garbageCollectionThreshold())
                    .isEqualTo(0.5);
            assertThat(AllocatorConfig.parse("roundup_power2_divisions:[\t256:\t4]")
                            .roundupPower2Divisions(256 * MiB))
                    .isEqualTo(4);
        }

        @Test
        void garbageCollectionThresholdTakesAHexFloatAsStodDoes() {
            assertThat(AllocatorConfig.parse("garbage_collection_threshold:0x0.8")
                            .garbageCollectionThreshold())
                    .isEqualTo(0.5);
            assertThat(AllocatorConfig.parse("garbage_collection_threshold:0X1p-2")
                            .garbageCollectionThreshold())
                    .isEqualTo(0.25);
        }

        @Test
        void roundupIntervalIsUnsignedAsStoulReadsIt() {
            // stoul("-9223372036854775808") and stoul("9223372036854775808") are 2^63, a power of two: entry 15
            for (String k : new String[] {"-9223372036854775808", "9223372036854775808"}) {
                int[] table = AllocatorConfig.parse("roundup_power2_divisions:[" + k + ":4]")
                        .roundupPower2DivisionsTable();
                assertThat(table).containsOnly(4);
            }
            assertRejected(
                    "roundup_power2_divisions:[-1:4]", "roundup_power2_divisions", "intervals have to be power of 2");
            assertRejected(
                    "roundup_power2_divisions:[18446744073709551616:4]", "roundup_power2_divisions", "out of range");
        }

        @Test
        void maxNonSplitRounding() {
            assertThat(AllocatorConfig.parse("max_non_split_rounding_mb:20").maxNonSplitRounding())
                    .isEqualTo(20 * MiB);
            assertThat(AllocatorConfig.parse("max_non_split_rounding_mb:512").maxNonSplitRounding())
                    .isEqualTo(512 * MiB);
        }

        @Test
        void garbageCollectionThreshold() {
            assertThat(AllocatorConfig.parse("garbage_collection_threshold:0.6").garbageCollectionThreshold())
                    .isEqualTo(0.6);
            assertThat(AllocatorConfig.parse("garbage_collection_threshold:.5").garbageCollectionThreshold())
                    .isEqualTo(0.5);
            assertThat(AllocatorConfig.parse("garbage_collection_threshold:9e-1")
                            .garbageCollectionThreshold())
                    .isEqualTo(0.9);
        }

        @Test
        void booleans() {
            AllocatorConfig c = AllocatorConfig.parse("expandable_segments:True,release_lock_on_cudamalloc:True,"
                    + "pinned_use_cuda_host_register:True,pinned_use_background_threads:True");
            assertThat(c.expandableSegments()).isTrue();
            assertThat(c.releaseLockOnCudaMalloc()).isTrue();
            assertThat(c.pinnedUseCudaHostRegister()).isTrue();
            assertThat(c.pinnedUseBackgroundThreads()).isTrue();
            AllocatorConfig off = c.reparse("expandable_segments:False,release_lock_on_cudamalloc:False,"
                    + "pinned_use_cuda_host_register:False,pinned_use_background_threads:False");
            assertThat(off.expandableSegments()).isFalse();
            assertThat(off.releaseLockOnCudaMalloc()).isFalse();
            assertThat(off.pinnedUseCudaHostRegister()).isFalse();
            assertThat(off.pinnedUseBackgroundThreads()).isFalse();
        }

        @Test
        void hipAliases() {
            AllocatorConfig c = AllocatorConfig.parse(
                    "release_lock_on_hipmalloc:True,pinned_use_hip_host_register:True,backend:hipMallocAsync");
            assertThat(c.releaseLockOnCudaMalloc()).isTrue();
            assertThat(c.pinnedUseCudaHostRegister()).isTrue();
            assertThat(c.backend()).isEqualTo("cudaMallocAsync");
        }

        @Test
        void backend() {
            assertThat(AllocatorConfig.parse("backend:native").backend()).isEqualTo("native");
            assertThat(AllocatorConfig.parse("backend:cudaMallocAsync").backend())
                    .isEqualTo("cudaMallocAsync");
        }

        @Test
        void pinnedRegisterThreads() {
            assertThat(AllocatorConfig.parse("pinned_num_register_threads:1").pinnedNumRegisterThreads())
                    .isEqualTo(1);
            assertThat(AllocatorConfig.parse("pinned_num_register_threads:8").pinnedNumRegisterThreads())
                    .isEqualTo(8);
            assertThat(AllocatorConfig.parse("pinned_num_register_threads:128").pinnedNumRegisterThreads())
                    .isEqualTo(128);
        }

        @Test
        void severalOptionsSpacesAndATrailingComma() {
            AllocatorConfig c = AllocatorConfig.parse(" max_split_size_mb : 256 , expandable_segments : True , ");
            assertThat(c.maxSplitSize()).isEqualTo(256 * MiB);
            assertThat(c.expandableSegments()).isTrue();
        }

        @Test
        void aRepeatedKeyOverrides() {
            assertThat(AllocatorConfig.parse("max_split_size_mb:100,max_split_size_mb:200")
                            .maxSplitSize())
                    .isEqualTo(200 * MiB);
        }
    }

    @Nested
    class RoundupDivisions {
        @Test
        void specExampleListFillsBelowFirstKeyAndGreaterFromLastKeyInclusive() {
            // allocator.md §9.3: [256:1,512:2,1024:4,>:8] gives 1 below 512 MiB, 2 for [512 MiB, 1 GiB), 8 (not 4) from
            // 1 GiB.
            AllocatorConfig c = AllocatorConfig.parse("roundup_power2_divisions:[256:1,512:2,1024:4,>:8]");
            assertThat(c.roundupPower2DivisionsTable()).containsExactly(1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 8, 8, 8, 8, 8, 8);
            assertThat(c.roundupPower2Divisions(1)).isEqualTo(1);
            assertThat(c.roundupPower2Divisions(1000)).isEqualTo(1);
            assertThat(c.roundupPower2Divisions(256 * MiB)).isEqualTo(1);
            assertThat(c.roundupPower2Divisions(512 * MiB - 1)).isEqualTo(1);
            assertThat(c.roundupPower2Divisions(512 * MiB)).isEqualTo(2);
            assertThat(c.roundupPower2Divisions(GiB - 1)).isEqualTo(2);
            assertThat(c.roundupPower2Divisions(GiB)).isEqualTo(8);
            assertThat(c.roundupPower2Divisions(2 * GiB)).isEqualTo(8);
            assertThat(c.roundupPower2Divisions(1L << 40)).isEqualTo(8);
        }

        @Test
        void sizesFrom32GiBUpTakeTheLastInterval() {
            // index floor(log2(size)) - 20, clamped to 15: 32 GiB is interval 15, and so is everything larger
            AllocatorConfig c = AllocatorConfig.parse("roundup_power2_divisions:[16384:2,32768:4,>:8]");
            assertThat(c.roundupPower2DivisionsTable()).containsExactly(2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 8);
            assertThat(c.roundupPower2Divisions(32 * GiB - 1)).isEqualTo(2);
            assertThat(c.roundupPower2Divisions(32 * GiB)).isEqualTo(8);
            assertThat(c.roundupPower2Divisions(64 * GiB))
                    .as("interval 16, clamped")
                    .isEqualTo(8);
            assertThat(c.roundupPower2Divisions(Long.MAX_VALUE)).isEqualTo(8);
            assertThat(c.roundupPower2Divisions(0)).isEqualTo(2);
        }

        @Test
        void singleValueAppliesToEveryInterval() {
            AllocatorConfig c = AllocatorConfig.parse("roundup_power2_divisions:4");
            assertThat(c.roundupPower2DivisionsTable()).containsOnly(4);
            // allocator.md §1.2 examples run with d=4: 1200, 3000 and 1,200,000 bytes all see d=4.
            assertThat(c.roundupPower2Divisions(1200)).isEqualTo(4);
            assertThat(c.roundupPower2Divisions(3000)).isEqualTo(4);
            assertThat(c.roundupPower2Divisions(1_200_000)).isEqualTo(4);
            assertThat(AllocatorConfig.parse("roundup_power2_divisions:1").roundupPower2DivisionsTable())
                    .containsOnly(1);
        }

        @Test
        void specRoundingExampleSizeFindsItsInterval() {
            // allocator.md §1.2: (300 MiB + 1) with d=2; 300 MiB lies in [256, 512) MiB, the interval of key 256.
            AllocatorConfig c = AllocatorConfig.parse("roundup_power2_divisions:[128:4,256:2,512:8]");
            assertThat(c.roundupPower2Divisions(300 * MiB + 1)).isEqualTo(2);
            assertThat(c.roundupPower2Divisions(200 * MiB)).isEqualTo(4);
            assertThat(c.roundupPower2Divisions(600 * MiB)).isEqualTo(8);
            // No '>' entry: intervals after the last key keep 0 (plain 512-byte rounding).
            assertThat(c.roundupPower2Divisions(GiB)).isZero();
        }

        @Test
        void intervalIndexIsLog2OfSizeMinus20ClampedTo0And15() {
            // allocator.md §1.3: index 0 covers everything below 2 MiB, index k covers [2^k, 2^(k+1)) MiB, 15 covers >=
            // 32 GiB.
            StringBuilder list = new StringBuilder("roundup_power2_divisions:[");
            for (int k = 0; k < 16; k++) {
                list.append(k == 0 ? "" : ",").append(1L << k).append(':').append(k == 0 ? 0 : (1 << (k % 8)));
            }
            AllocatorConfig c = AllocatorConfig.parse(list.append(']').toString());
            int[] t = c.roundupPower2DivisionsTable();
            assertThat(c.roundupPower2Divisions(512)).isEqualTo(t[0]);
            assertThat(c.roundupPower2Divisions(2 * MiB - 1)).isEqualTo(t[0]);
            assertThat(c.roundupPower2Divisions(2 * MiB)).isEqualTo(t[1]);
            assertThat(c.roundupPower2Divisions(4 * MiB - 1)).isEqualTo(t[1]);
            assertThat(c.roundupPower2Divisions(4 * MiB)).isEqualTo(t[2]);
            assertThat(c.roundupPower2Divisions(32 * GiB - 1)).isEqualTo(t[14]);
            assertThat(c.roundupPower2Divisions(32 * GiB)).isEqualTo(t[15]);
            assertThat(c.roundupPower2Divisions(Long.MAX_VALUE)).isEqualTo(t[15]);
            assertThat(t[1]).isEqualTo(2);
            assertThat(t[15]).isEqualTo(1 << 7);
        }

        @Test
        void keyOneCoversEverythingBelowOneMiB() {
            AllocatorConfig c = AllocatorConfig.parse("roundup_power2_divisions:[1:2,2:4]");
            assertThat(c.roundupPower2Divisions(600)).isEqualTo(2);
            assertThat(c.roundupPower2Divisions(MiB)).isEqualTo(2);
            assertThat(c.roundupPower2Divisions(2 * MiB)).isEqualTo(4);
        }

        @Test
        void keysAboveTheTableClampToTheLastEntry() {
            AllocatorConfig c = AllocatorConfig.parse("roundup_power2_divisions:[1048576:2]");
            assertThat(c.roundupPower2DivisionsTable()).containsOnly(2);
        }

        @Test
        void greaterFirstFillsEverythingAndALaterFirstKeyStillFillsBelowIt() {
            AllocatorConfig c = AllocatorConfig.parse("roundup_power2_divisions:[>:2,64:4]");
            assertThat(c.roundupPower2DivisionsTable()).containsExactly(4, 4, 4, 4, 4, 4, 4, 2, 2, 2, 2, 2, 2, 2, 2, 2);
        }

        @Test
        void zeroDisablesAnIntervalAndAnEmptyListIsDefaults() {
            AllocatorConfig c = AllocatorConfig.parse("roundup_power2_divisions:[256:4,512:0]");
            assertThat(c.roundupPower2Divisions(300 * MiB)).isEqualTo(4);
            assertThat(c.roundupPower2Divisions(600 * MiB)).isZero();
            assertThat(AllocatorConfig.parse("roundup_power2_divisions:[]").roundupPower2DivisionsTable())
                    .containsOnly(0);
        }

        @Test
        void listFollowedByAnotherOption() {
            AllocatorConfig c = AllocatorConfig.parse("roundup_power2_divisions:[>:4],expandable_segments:True");
            assertThat(c.roundupPower2DivisionsTable()).containsOnly(4);
            assertThat(c.expandableSegments()).isTrue();
        }
    }

    @Nested
    class Reparse {
        @Test
        void threeOptionsResetOnEveryParseOthersPersist() {
            AllocatorConfig first = AllocatorConfig.parse("max_split_size_mb:128,roundup_power2_divisions:4,"
                    + "garbage_collection_threshold:0.5,expandable_segments:True,max_non_split_rounding_mb:64,"
                    + "release_lock_on_cudamalloc:True,pinned_num_register_threads:4,backend:cudaMallocAsync");
            AllocatorConfig second = first.reparse("pinned_use_background_threads:True");
            assertThat(second.maxSplitSize()).isEqualTo(AllocatorConfig.UNLIMITED);
            assertThat(second.roundupPower2DivisionsTable()).containsOnly(0);
            assertThat(second.garbageCollectionThreshold()).isZero();
            assertThat(second.expandableSegments()).isTrue();
            assertThat(second.maxNonSplitRounding()).isEqualTo(64 * MiB);
            assertThat(second.releaseLockOnCudaMalloc()).isTrue();
            assertThat(second.pinnedNumRegisterThreads()).isEqualTo(4);
            assertThat(second.backend()).isEqualTo("cudaMallocAsync");
            assertThat(second.pinnedUseBackgroundThreads()).isTrue();
            assertThat(second.raw()).isEqualTo("pinned_use_background_threads:True");
        }

        @Test
        void emptyReparseStillResetsTheThree() {
            AllocatorConfig first = AllocatorConfig.parse("max_split_size_mb:128,expandable_segments:True");
            AllocatorConfig second = first.reparse("");
            assertThat(second.maxSplitSize()).isEqualTo(AllocatorConfig.UNLIMITED);
            assertThat(second.expandableSegments()).isTrue();
        }

        @Test
        void aFailedReparseLeavesThePreviousConfigUsable() {
            AllocatorConfig first = AllocatorConfig.parse("max_split_size_mb:128");
            assertThatThrownBy(() -> first.reparse("max_split_size_mb:10")).isInstanceOf(ConfigException.class);
            assertThat(first.maxSplitSize()).isEqualTo(128 * MiB);
        }
    }

    @Nested
    class Errors {
        @Test
        void unknownKey() {
            assertRejected(
                    "max_split_size:128", "max_split_size", "Unrecognized CachingAllocator option: max_split_size");
            assertRejected("expandable_segments:True,foo:1", "foo", "Unrecognized CachingAllocator option: foo");
            // The newest-only options are not part of the 2.5/2.6 grammar we reproduce.
            assertRejected("pinned_reserve_segment_size_mb:4", "pinned_reserve_segment_size_mb", "Unrecognized");
        }

        @Test
        void leadingOrDoubleCommaIsAnUnknownOption() {
            assertRejected(",expandable_segments:True", ",", "Unrecognized CachingAllocator option: ,");
            assertRejected(
                    "expandable_segments:True,,max_split_size_mb:30", ",", "Unrecognized CachingAllocator option: ,");
        }

        @Test
        void keysAreCaseSensitive() {
            assertRejected("Expandable_Segments:True", "Expandable_Segments", "Unrecognized");
        }

        @Test
        void missingColon() {
            assertRejected("max_split_size_mb", "max_split_size_mb", "expected :");
            assertRejected("max_split_size_mb,128", "max_split_size_mb", "expected :");
            assertRejected("expandable_segments", "expandable_segments", "expected :");
            // every key reads its colon, whichever kind of value follows
            assertRejected("garbage_collection_threshold,0.6", "garbage_collection_threshold", "expected :");
            assertRejected("roundup_power2_divisions,4", "roundup_power2_divisions", "expected :");
            assertRejected("backend,native", "backend", "expected :");
            assertRejected("max_non_split_rounding_mb", "max_non_split_rounding_mb", "expected :");
        }

        @Test
        void missingValue() {
            assertRejected("max_split_size_mb:", "max_split_size_mb", "Error, expecting max_split_size_mb value");
            assertRejected("garbage_collection_threshold:", "garbage_collection_threshold", "expecting");
            assertRejected("roundup_power2_divisions:", "roundup_power2_divisions", "expecting");
            assertRejected("backend:", "backend", "expecting backend value");
            assertRejected(
                    "expandable_segments:",
                    "expandable_segments",
                    "Expected a single True/False argument for expandable_segments");
        }

        @Test
        void missingCommaBetweenOptions() {
            assertRejected("expandable_segments:True:False", "expandable_segments", "expected ,");
            assertRejected(
                    "max_split_size_mb:128 expandable_segments:True", "max_split_size_mb", "expected an integer");
        }

        @Test
        void maxSplitSizeTooSmall() {
            assertRejected(
                    "max_split_size_mb:20",
                    "max_split_size_mb",
                    "CachingAllocator option max_split_size_mb too small, must be > 20");
            assertRejected("max_split_size_mb:0", "max_split_size_mb", "too small, must be > 20");
        }

        @Test
        void integersMustBeWholeNumbersInIntRange() {
            assertRejected("max_split_size_mb:25abc", "max_split_size_mb", "expected an integer, got '25abc'");
            assertRejected("max_split_size_mb:1.5", "max_split_size_mb", "expected an integer");
            assertRejected("max_split_size_mb:99999999999", "max_split_size_mb", "out of int range");
            assertRejected("pinned_num_register_threads:x", "pinned_num_register_threads", "expected an integer");
        }

        @Test
        void maxNonSplitRoundingTooSmall() {
            assertRejected(
                    "max_non_split_rounding_mb:19",
                    "max_non_split_rounding_mb",
                    "max_non_split_rounding_mb too small, must be >= 20");
        }

        @Test
        void garbageCollectionThresholdStrictlyInsideZeroOne() {
            assertRejected(
                    "garbage_collection_threshold:0",
                    "garbage_collection_threshold",
                    "garbage_collect_threshold too small, set it 0.0~1.0");
            assertRejected("garbage_collection_threshold:-0.5", "garbage_collection_threshold", "too small");
            assertRejected(
                    "garbage_collection_threshold:1.0",
                    "garbage_collection_threshold",
                    "garbage_collect_threshold too big, set it 0.0~1.0");
            assertRejected("garbage_collection_threshold:2", "garbage_collection_threshold", "too big");
            assertRejected("garbage_collection_threshold:abc", "garbage_collection_threshold", "expected a number");
            assertRejected("garbage_collection_threshold:NaN", "garbage_collection_threshold", "expected a number");
        }

        @Test
        void booleansAreExactlyTrueOrFalse() {
            for (String key : new String[] {
                "expandable_segments",
                "release_lock_on_cudamalloc",
                "release_lock_on_hipmalloc",
                "pinned_use_cuda_host_register",
                "pinned_use_hip_host_register",
                "pinned_use_background_threads"
            }) {
                assertRejected(key + ":true", key, "Expected a single True/False argument for " + key);
                assertRejected(key + ":1", key, "Expected a single True/False argument for " + key);
                assertRejected(key + ":TRUE", key, "Expected a single True/False argument");
            }
        }

        @Test
        void unknownBackend() {
            assertRejected(
                    "backend:async", "backend", "Unknown allocator backend, options are native and cudaMallocAsync");
            assertRejected("backend:Native", "backend", "Unknown allocator backend");
        }

        @Test
        void pinnedRegisterThreadsPowerOfTwoAtMost128() {
            assertRejected(
                    "pinned_num_register_threads:3",
                    "pinned_num_register_threads",
                    "Number of register threads has to be power of 2");
            assertRejected("pinned_num_register_threads:0", "pinned_num_register_threads", "power of 2");
            assertRejected(
                    "pinned_num_register_threads:256",
                    "pinned_num_register_threads",
                    "Number of register threads should be less than or equal to 128");
        }

        @Test
        void roundupSingleValueMustBeAPowerOfTwo() {
            assertRejected(
                    "roundup_power2_divisions:3",
                    "roundup_power2_divisions",
                    "For roundups, the divisions has to be power of 2");
            assertRejected("roundup_power2_divisions:0", "roundup_power2_divisions", "has to be power of 2");
            assertRejected("roundup_power2_divisions:four", "roundup_power2_divisions", "expected an integer");
        }

        @Test
        void roundupListErrors() {
            String key = "roundup_power2_divisions";
            assertRejected(key + ":[256:3]", key, "the divisions has to be power of 2 or 0 to disable roundup");
            assertRejected(key + ":[>:6]", key, "power of 2 or 0");
            assertRejected(key + ":[300:2]", key, "For roundups, the intervals have to be power of 2");
            assertRejected(key + ":[0:2]", key, "intervals have to be power of 2");
            assertRejected(key + ":[abc:2]", key, "expected an interval size in MB or '>'");
            assertRejected(key + ":[256:1", key, "expected ] to close");
            assertRejected(key + ":[256:1,", key, "expected ] to close");
            assertRejected(key + ":[", key, "expected ] to close");
            assertRejected(key + ":[256]", key, "expected :");
            assertRejected(key + ":[256:]", key, "expected an integer, got ']'");
            assertRejected(key + ":[256:", key, "missing divisions");
            // Spaces join words, so "1 512" is the single (non power of two) count 1512.
            assertRejected(
                    key + ":[256:1 512:2]", key, "power of 2 or 0 to disable roundup (option " + key + ", got 1512)");
            assertRejected(key + ":[256:1:512:2]", key, "expected ,");
        }

        @Test
        void errorInALaterOptionStillNamesThatOption() {
            assertRejected("expandable_segments:True,max_split_size_mb:1", "max_split_size_mb", "too small");
        }
    }

    @Test
    void aConfigurationIsWrittenAsTheOptionsThatDifferFromTheDefaults() {
        assertThat(AllocatorConfig.defaults().toConfString()).isEmpty();
        assertThat(AllocatorConfig.parse("expandable_segments:False,max_split_size_mb:100,")
                        .toConfString())
                .isEqualTo("max_split_size_mb:100");
        AllocatorConfig every = AllocatorConfig.parse(
                "backend:cudaMallocAsync,max_split_size_mb:64,"
                        + "max_non_split_rounding_mb:40,roundup_power2_divisions:[4:2,64:8,>:0],"
                        + "garbage_collection_threshold:0.75,expandable_segments:True,release_lock_on_hipmalloc:True,"
                        + "pinned_use_cuda_host_register:True,pinned_num_register_threads:8,pinned_use_background_threads:True");
        assertThat(every.toConfString())
                .isEqualTo("backend:cudaMallocAsync,max_split_size_mb:64,max_non_split_rounding_mb:40,"
                        + "roundup_power2_divisions:[1:2,2:2,4:2],garbage_collection_threshold:0.75,"
                        + "expandable_segments:True,release_lock_on_cudamalloc:True,pinned_use_cuda_host_register:True,"
                        + "pinned_num_register_threads:8,pinned_use_background_threads:True");
        assertThat(AllocatorConfigParserRandomTest.settings(AllocatorConfig.parse(every.toConfString())))
                .isEqualTo(AllocatorConfigParserRandomTest.settings(every));
        // a list that leaves the smallest intervals at 0 says so, or its first key would fill them
        AllocatorConfig upper = AllocatorConfig.parse("roundup_power2_divisions:[1:0,1024:4]");
        assertThat(upper.toConfString()).isEqualTo("roundup_power2_divisions:[1:0,1024:4]");
        assertThat(AllocatorConfig.parse("roundup_power2_divisions:4").toConfString())
                .isEqualTo("roundup_power2_divisions:4");
    }
}
