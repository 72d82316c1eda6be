package io.gpumem.trace.workload;

import io.gpumem.engine.MinimumCapacity;
import io.gpumem.engine.RequestStream;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.BitSet;
import java.util.List;
import java.util.Locale;
import java.util.SplittableRandom;

/**
 * A generated request stream of a transformer-like training loop whose sequence length changes from step
 * to step: the allocation pattern that fragments PyTorch's caching allocator in real jobs.
 *
 * <h2>What is generated</h2>
 * <ol>
 *   <li><b>Setup</b>: every parameter (token embedding, per layer two layer norms, QKV, output projection,
 *       MLP up and down with biases, final norm, LM head), {@code dtypeBytes} per element.</li>
 *   <li><b>Per step</b>, with a sequence length drawn for the step (tokens T = batch × seq):
 *     <ul>
 *       <li>forward: input ids, embedding output, then per layer the activations autograd saves (norm
 *           outputs and statistics, QKV, attention output and log-sum-exp, optionally the materialised
 *           attention probabilities of size batch × heads × seq², MLP up and activation outputs, residual
 *           stream) with the pre-residual temporaries freed at once; then logits and an fp32 log-softmax;</li>
 *       <li>backward, layers in reverse: activation gradients (temporaries) and each parameter's gradient,
 *           freeing the layer's saved activations as soon as their use is over;</li>
 *       <li>AdamW: at the first step two fp32 states per parameter ({@code optimizerStateBytes} per
 *           element); every step one scratch buffer per parameter, freed at once;</li>
 *       <li>{@code zero_grad(set_to_none=True)}: every gradient freed (or kept when
 *           {@link Builder#keepGradients(boolean)}).</li>
 *     </ul></li>
 * </ol>
 * All requests go to stream 0.
 *
 * <h2>Invariants</h2>
 * Deterministic for a seed: the same builder produces the same ops. Balanced: every allocation is freed
 * exactly once, except weights, optimizer states (and kept gradients), which are live at the end
 * ({@link #liveAtEnd()}). Frees never name an unknown or already freed slot. The ops are written straight into
 * the engine's {@link RequestStream} (a STEP opens each step; each op's source entry is its own index); each
 * allocation's slot indexes its {@link #kind} and {@link #tensorName}, and its site is its stack
 * ({@link TrainingFrames}).
 */
public final class TrainingWorkload implements AllocationWorkload {
    private final Builder config;
    private final RequestStream stream;
    private final TensorKind[] kinds;
    private final String[] names;
    private final int[] seqLens;
    private final BitSet liveAtEnd;
    private final long parameterCount;
    /** The stream's peak of live request bytes, at most {@link MinimumCapacity#LARGEST} (checked by the builder). */
    private final long peakLiveBytes;

    private TrainingWorkload(Builder config) {
        this.config = config.copy();
        Generator g = new Generator(this.config);
        g.generate();
        this.stream = g.ops.build();
        this.kinds = g.kinds.toArray(TensorKind[]::new);
        this.names = g.names.toArray(String[]::new);
        this.seqLens = g.seqLens;
        this.liveAtEnd = g.live;
        this.parameterCount = g.parameterCount;
        this.peakLiveBytes = this.config.checkPeakLive(stream);
    }

    /** A builder with the defaults documented on each setter. */
    public static Builder builder() {
        return new Builder();
    }

    /** The request stream, in program order; each allocation's stack is its op, layer and training phase. */
    @Override
    public RequestStream stream() {
        return stream;
    }

    /** What allocation {@code slot} stands for. */
    public TensorKind kind(int slot) {
        return kinds[slot];
    }

    /** The tensor allocation {@code slot} holds, e.g. {@code layers.3.attn.qkv.out} or {@code grad.embed.weight}. */
    public String tensorName(int slot) {
        return names[slot];
    }

    /** Peak of the sum of live tensor bytes (computed once: the demo prints it and its runs bound their search by it). */
    @Override
    public long peakLiveBytes() {
        return peakLiveBytes;
    }

    /** The sequence length of each step. */
    public int[] seqLens() {
        return seqLens.clone();
    }

    /** Whether allocation {@code slot} is meant to be live at the end (weights, optimizer state, kept gradients). */
    public boolean isLiveAtEnd(int slot) {
        return liveAtEnd.get(slot);
    }

    /** The slots live at the end. */
    public BitSet liveAtEnd() {
        return (BitSet) liveAtEnd.clone();
    }

    /** Number of model parameters. */
    public long parameterCount() {
        return parameterCount;
    }

    /** The settings this workload was generated from (a copy). */
    public Builder settings() {
        return config.copy();
    }

    /** The same workload with another batch size (the "smaller batch" what-if). */
    public TrainingWorkload withBatch(int batch) {
        return config.copy().batch(batch).build();
    }

    /** One line describing the model and the run. */
    @Override
    public String describe() {
        return String.format(
                Locale.ROOT,
                "transformer training: %d layers, hidden %d, %d heads, vocab %d, %.2fB parameters, batch %d, "
                        + "seq %s, %d steps, seed %d",
                config.layers,
                config.hidden,
                config.heads,
                config.vocab,
                parameterCount / 1e9,
                config.batch,
                config.seqSchedule != null
                        ? Arrays.toString(config.seqSchedule)
                        : config.minSeqLen + ".." + config.maxSeqLen + " (multiples of " + config.seqLenMultiple + ")",
                config.steps,
                config.seed);
    }

    /**
     * Parameters of the generated job. Every setter validates its argument and names it in the error.
     */
    public static final class Builder {
        private int layers = 16;
        private int hidden = 2048;
        private int heads = 16;
        private int ffnMultiplier = 4;
        private int vocab = 32_000;
        private int batch = 6;
        private int minSeqLen = 256;
        private int maxSeqLen = 2048;
        private int seqLenMultiple = 128;
        private int[] seqSchedule;
        private int steps = 10;
        private long seed = 42;
        private int dtypeBytes = 2;
        private int optimizerStateBytes = 4;
        private boolean materializedAttention = false;
        private boolean keepGradients = false;

        /** Transformer blocks (default 16). */
        public Builder layers(int v) {
            this.layers = positive("layers", v);
            return this;
        }
        /** Model width (default 2048); must be a multiple of {@code heads}. */
        public Builder hidden(int v) {
            this.hidden = positive("hidden", v);
            return this;
        }
        /** Attention heads (default 16). */
        public Builder heads(int v) {
            this.heads = positive("heads", v);
            return this;
        }
        /** MLP width as a multiple of hidden (default 4). */
        public Builder ffnMultiplier(int v) {
            this.ffnMultiplier = positive("ffnMultiplier", v);
            return this;
        }
        /** Vocabulary size (default 32000). */
        public Builder vocab(int v) {
            this.vocab = positive("vocab", v);
            return this;
        }
        /** Sequences per step (default 6). */
        public Builder batch(int v) {
            this.batch = positive("batch", v);
            return this;
        }
        /**
         * Sequence lengths drawn uniformly per step from [min, max] in multiples of {@code multiple}
         * (defaults 256, 2048, 128). Clears an explicit schedule.
         */
        public Builder seqLens(int min, int max, int multiple) {
            positive("min sequence length", min);
            positive("sequence length multiple", multiple);
            if (max < min) {
                throw new IllegalArgumentException("max sequence length " + max + " is below min " + min);
            }
            if (max / multiple < Math.ceilDiv(min, multiple)) {
                throw new IllegalArgumentException(
                        "no multiple of " + multiple + " lies in [" + min + ", " + max + "]");
            }
            this.minSeqLen = min;
            this.maxSeqLen = max;
            this.seqLenMultiple = multiple;
            this.seqSchedule = null;
            return this;
        }
        /** An explicit sequence length per step, cycled when there are more steps (overrides the range). */
        public Builder seqSchedule(int... lens) {
            if (lens.length == 0) {
                throw new IllegalArgumentException("sequence schedule is empty");
            }
            for (int l : lens) {
                positive("sequence length", l);
            }
            this.seqSchedule = lens.clone();
            return this;
        }
        /** Training steps (default 10). */
        public Builder steps(int v) {
            this.steps = positive("steps", v);
            return this;
        }
        /** Seed of the sequence-length draws (default 42). */
        public Builder seed(long v) {
            this.seed = v;
            return this;
        }
        /** Bytes per element of weights, gradients and activations (default 2, bf16). */
        public Builder dtypeBytes(int v) {
            this.dtypeBytes = positive("dtypeBytes", v);
            return this;
        }
        /** Bytes per element of each of AdamW's two states (default 4, fp32). */
        public Builder optimizerStateBytes(int v) {
            this.optimizerStateBytes = positive("optimizerStateBytes", v);
            return this;
        }
        /** Save batch × heads × seq² attention probabilities, as eager attention does (default false: fused attention). */
        public Builder materializedAttention(boolean v) {
            this.materializedAttention = v;
            return this;
        }
        /** Keep gradients between steps, as {@code zero_grad(set_to_none=False)} does (default false). */
        public Builder keepGradients(boolean v) {
            this.keepGradients = v;
            return this;
        }

        public int layers() {
            return layers;
        }

        public int hidden() {
            return hidden;
        }

        public int heads() {
            return heads;
        }

        public int vocab() {
            return vocab;
        }

        public int batch() {
            return batch;
        }

        /** Shortest sequence length drawn (without a fixed schedule). */
        public int minSeqLen() {
            return minSeqLen;
        }

        /** Longest sequence length drawn (without a fixed schedule). */
        public int maxSeqLen() {
            return maxSeqLen;
        }

        /** Sequence lengths drawn are multiples of this. */
        public int seqLenMultiple() {
            return seqLenMultiple;
        }

        public int steps() {
            return steps;
        }

        public long seed() {
            return seed;
        }

        /**
         * Generates the workload, after checking up front (with overflow-checked arithmetic) that every tensor
         * is under {@link #MAX_TENSOR_BYTES} and that the ops, all generated before a run, stay under
         * {@link #MAX_OPS}; then that the tensors live at once stay within the largest capacity the runs model,
         * {@link MinimumCapacity#LARGEST} (a sum of tensors each under 1 EiB can exceed it, even 2^63 bytes).
         *
         * @throws IllegalArgumentException naming the settings that are too large
         */
        public TrainingWorkload build() {
            if (hidden % heads != 0) {
                throw new IllegalArgumentException("hidden " + hidden + " is not a multiple of heads " + heads);
            }
            checkSizes();
            return new TrainingWorkload(this);
        }

        /** Largest single tensor accepted: 1 EiB, where PyTorch's allocator stops as well. */
        public static final long MAX_TENSOR_BYTES = 1L << 60;
        /** Most allocator calls a generated run may hold (they are generated before the run starts). */
        public static final long MAX_OPS = 20_000_000L;

        private void checkSizes() {
            long seq = longestSeqLen();
            long elementBytes = Math.max(Math.max(dtypeBytes, optimizerStateBytes), 8);
            try {
                long h = hidden;
                long f = Math.multiplyExact(h, ffnMultiplier);
                long tokens = Math.multiplyExact((long) batch, seq);
                long widest = Math.max(Math.max(Math.multiplyExact(3, h), f), vocab);
                long largest = Math.max(
                        Math.max(Math.multiplyExact((long) vocab, h), Math.multiplyExact(3, Math.multiplyExact(h, h))),
                        Math.max(Math.multiplyExact(f, h), Math.multiplyExact(tokens, widest)));
                if (materializedAttention) {
                    largest = Math.max(largest, Math.multiplyExact(Math.multiplyExact(tokens, heads), seq));
                }
                long perLayer = Math.addExact(
                        Math.multiplyExact(4, Math.multiplyExact(h, h)),
                        Math.multiplyExact(2, Math.multiplyExact(f, h)));
                long parameters = Math.addExact(
                        Math.multiplyExact(2, Math.multiplyExact((long) vocab, h)),
                        Math.multiplyExact(layers, perLayer));
                if (Math.multiplyExact(Math.max(largest, parameters), elementBytes) > MAX_TENSOR_BYTES) {
                    throw new ArithmeticException();
                }
            } catch (ArithmeticException e) {
                throw new IllegalArgumentException("the model is too large to simulate: with hidden " + hidden
                        + ", vocab " + vocab + ", " + layers + " layers, batch " + batch + " and sequences up to " + seq
                        + ", a tensor or the parameters would take more than 1 EiB");
            }
            long ops = ops();
            if (ops > MAX_OPS) {
                throw new IllegalArgumentException(steps + " steps of " + layers + " layers would generate "
                        + (ops == Long.MAX_VALUE ? "more than 2^63 - 1" : Long.toString(ops))
                        + " ops (allocator calls and step marks), over the limit of " + MAX_OPS
                        + " (the ops are generated before the run): use fewer steps or layers");
            }
        }

        /**
         * The exact length of the generated stream (its allocs, frees and STEP marks), {@code Long.MAX_VALUE} when
         * it does not fit in a long. Counted from the generator's shape, which is fixed by layers, steps,
         * {@link #materializedAttention} and {@link #keepGradients} alone, so the limit is checked before anything
         * is generated; TrainingWorkloadTest holds it to the generated length. Keep it in step with
         * {@link Generator#step}.
         */
        long ops() {
            long paramTensors = 12L * layers + 4; // embedding, 12 per layer, final norm's two, LM head
            // per layer: forward 13 allocs and 2 frees; backward 8 activation-gradient allocs and 19 frees (the
            // parameter gradients are counted below); materialised attention adds scores and probs (alloc, alloc,
            // free) forward and their gradient (alloc, free, free of the saved probs) backward
            long perLayer = 42L + (materializedAttention ? 6 : 0);
            // STEP mark, forward outside the layers 7 (ids, embedding, norm and its stats, logits, log-softmax, loss),
            // backward outside the layers 11 allocs and frees, 2 frees at its end
            long outsideLayers = 1 + 7 + 11 + 2;
            try {
                long body = Math.addExact(outsideLayers, Math.multiplyExact(perLayer, layers));
                // AdamW's scratch per parameter (alloc and free); zero_grad frees every gradient unless kept
                long perParam = 2L + (keepGradients ? 0 : 1);
                long steady = Math.addExact(body, Math.multiplyExact(perParam, paramTensors));
                // a gradient per parameter each step (kept gradients: the first step only)
                long gradients = Math.multiplyExact(keepGradients ? 1 : (long) steps, paramTensors);
                // the weights, then at the first step AdamW's two states per parameter
                long once = Math.multiplyExact(3, paramTensors);
                return Math.addExact(Math.addExact(once, gradients), Math.multiplyExact(steady, (long) steps));
            } catch (ArithmeticException e) {
                return Long.MAX_VALUE;
            }
        }

        /**
         * The generated stream's peak of live bytes, refused (naming the settings) when it is over what a run can
         * model: the minimum-capacity search refuses any stream whose live bytes exceed
         * {@link MinimumCapacity#LARGEST}, and every other figure of a run would be as meaningless. Checked on the
         * generated stream rather than estimated, so a model that fits is never refused.
         */
        long checkPeakLive(RequestStream stream) {
            String peak;
            try {
                long bytes = stream.peakLiveBytes();
                if (bytes <= MinimumCapacity.LARGEST) {
                    return bytes;
                }
                peak = bytes + " bytes";
            } catch (ArithmeticException e) {
                peak = "more than 2^63 - 1 bytes";
            }
            throw new IllegalArgumentException("the model is too large to simulate: with hidden " + hidden + ", vocab "
                    + vocab + ", " + layers + " layers, batch " + batch + " and sequences up to " + longestSeqLen()
                    + ", the tensors live at once would take " + peak + ", more than the 2^60 bytes (1 EiB) of the"
                    + " largest device a run models: use fewer layers, a smaller batch, hidden or sequence length");
        }

        /** The longest sequence length of any step: the schedule's longest, else the range's top. */
        private int longestSeqLen() {
            return seqSchedule != null ? Arrays.stream(seqSchedule).max().orElseThrow() : maxSeqLen;
        }

        Builder copy() {
            Builder b = new Builder();
            b.layers = layers;
            b.hidden = hidden;
            b.heads = heads;
            b.ffnMultiplier = ffnMultiplier;
            b.vocab = vocab;
            b.batch = batch;
            b.minSeqLen = minSeqLen;
            b.maxSeqLen = maxSeqLen;
            b.seqLenMultiple = seqLenMultiple;
            b.seqSchedule = seqSchedule == null ? null : seqSchedule.clone();
            b.steps = steps;
            b.seed = seed;
            b.dtypeBytes = dtypeBytes;
            b.optimizerStateBytes = optimizerStateBytes;
            b.materializedAttention = materializedAttention;
            b.keepGradients = keepGradients;
            return b;
        }

        private static int positive(String name, int v) {
            if (v <= 0) {
                throw new IllegalArgumentException(name + " must be positive, got " + v);
            }
            return v;
        }
    }

    /** Emits the ops; one instance per build. */
    private static final class Generator {
        private final Builder c;
        final RequestStream.Builder ops = AllocationWorkload.streamBuilder();
        final List<TensorKind> kinds = new ArrayList<>();
        final List<String> names = new ArrayList<>();
        private final TrainingFrames frames = new TrainingFrames();
        final BitSet live = new BitSet();
        final int[] seqLens;
        long parameterCount;
        /** Parameter element counts and names, in creation order; gradients and states follow it. */
        private final List<long[]> params = new ArrayList<>();

        private final List<String> paramNames = new ArrayList<>();
        private int[] gradIds;
        private boolean statesCreated;

        Generator(Builder c) {
            this.c = c;
            this.seqLens = new int[c.steps];
            SplittableRandom random = new SplittableRandom(c.seed);
            int lo = Math.ceilDiv(c.minSeqLen, c.seqLenMultiple);
            int hi = c.maxSeqLen / c.seqLenMultiple;
            // lo + nextInt(count), not nextInt(lo, hi + 1): hi + 1 overflows when the range ends at Integer.MAX_VALUE,
            // while the count cannot (lo >= 1); SplittableRandom draws the same values either way, so seeds keep
            // their sequence lengths
            int count = hi - lo + 1;
            for (int s = 0; s < c.steps; s++) {
                seqLens[s] = c.seqSchedule != null
                        ? c.seqSchedule[s % c.seqSchedule.length]
                        : (lo + random.nextInt(count)) * c.seqLenMultiple;
            }
        }

        void generate() {
            long h = c.hidden;
            long f = h * c.ffnMultiplier;
            param("embed.weight", c.vocab * h);
            for (int l = 0; l < c.layers; l++) {
                String p = "layers." + l + ".";
                param(p + "ln1.weight", h);
                param(p + "ln1.bias", h);
                param(p + "attn.qkv.weight", 3 * h * h);
                param(p + "attn.qkv.bias", 3 * h);
                param(p + "attn.out.weight", h * h);
                param(p + "attn.out.bias", h);
                param(p + "ln2.weight", h);
                param(p + "ln2.bias", h);
                param(p + "mlp.up.weight", f * h);
                param(p + "mlp.up.bias", f);
                param(p + "mlp.down.weight", h * f);
                param(p + "mlp.down.bias", h);
            }
            param("norm.weight", h);
            param("norm.bias", h);
            param("lm_head.weight", c.vocab * h);
            gradIds = new int[params.size()];
            Arrays.fill(gradIds, -1);
            for (int s = 0; s < c.steps; s++) {
                step(seqLens[s]);
            }
        }

        private void param(String name, long elements) {
            params.add(new long[] {elements});
            paramNames.add(name);
            parameterCount += elements;
            int id = alloc(TensorKind.WEIGHT, name, elements * c.dtypeBytes);
            live.set(id);
        }

        /** Index of the first parameter of layer l in {@link #params}. */
        private int layerParam(int l) {
            return 1 + 12 * l;
        }

        private void step(int seq) {
            ops.step(ops.length());
            long d = c.dtypeBytes;
            long t = (long) c.batch * seq;
            long h = c.hidden;
            long f = h * c.ffnMultiplier;
            long v = c.vocab;
            int[][] saved = new int[c.layers][];

            // ---- forward
            int ids = alloc(TensorKind.INPUT, "input_ids", t * 8);
            int x = alloc(TensorKind.ACTIVATION, "embed.out", t * h * d);
            for (int l = 0; l < c.layers; l++) {
                String p = "layers." + l + ".";
                int ln1 = alloc(TensorKind.ACTIVATION, p + "ln1.out", t * h * d);
                int ln1Stats = alloc(TensorKind.ACTIVATION, p + "ln1.stats", t * 8);
                int qkv = alloc(TensorKind.ACTIVATION, p + "attn.qkv.out", t * 3 * h * d);
                int probs = -1;
                if (c.materializedAttention) {
                    long scoresBytes = (long) c.batch * c.heads * seq * seq * d;
                    int scores = alloc(TensorKind.TEMPORARY, p + "attn.scores", scoresBytes);
                    probs = alloc(TensorKind.ACTIVATION, p + "attn.probs", scoresBytes);
                    free(scores);
                }
                int attn = alloc(TensorKind.ACTIVATION, p + "attn.ctx", t * h * d);
                int lse = alloc(TensorKind.ACTIVATION, p + "attn.lse", (long) c.batch * c.heads * seq * 4);
                int proj = alloc(TensorKind.TEMPORARY, p + "attn.out.out", t * h * d);
                int x1 = alloc(TensorKind.ACTIVATION, p + "resid1", t * h * d);
                free(proj);
                int ln2 = alloc(TensorKind.ACTIVATION, p + "ln2.out", t * h * d);
                int ln2Stats = alloc(TensorKind.ACTIVATION, p + "ln2.stats", t * 8);
                int up = alloc(TensorKind.ACTIVATION, p + "mlp.up.out", t * f * d);
                int act = alloc(TensorKind.ACTIVATION, p + "mlp.act.out", t * f * d);
                int down = alloc(TensorKind.TEMPORARY, p + "mlp.down.out", t * h * d);
                int x2 = alloc(TensorKind.ACTIVATION, p + "resid2", t * h * d);
                free(down);
                saved[l] = new int[] {x, ln1, ln1Stats, qkv, probs, attn, lse, x1, ln2, ln2Stats, up, act};
                x = x2;
            }
            int norm = alloc(TensorKind.ACTIVATION, "norm.out", t * h * d);
            int normStats = alloc(TensorKind.ACTIVATION, "norm.stats", t * 8);
            int logits = alloc(TensorKind.ACTIVATION, "lm_head.out", t * v * d);
            int logProbs = alloc(TensorKind.ACTIVATION, "loss.log_softmax", t * v * 4);
            int loss = alloc(TensorKind.TEMPORARY, "loss", 4);

            // ---- backward
            int gLogits = alloc(TensorKind.TEMPORARY, "grad.lm_head.out", t * v * d);
            free(loss);
            free(logProbs);
            grad(params.size() - 1);
            int gNorm = alloc(TensorKind.TEMPORARY, "grad.norm.out", t * h * d);
            free(gLogits);
            free(logits);
            int gx = alloc(TensorKind.TEMPORARY, "grad.resid", t * h * d);
            grad(params.size() - 3);
            grad(params.size() - 2);
            free(gNorm);
            free(norm);
            free(normStats);
            free(x);
            for (int l = c.layers - 1; l >= 0; l--) {
                String p = "grad.layers." + l + ".";
                int[] s = saved[l];
                int base = layerParam(l);
                // MLP down: dL/d(act) and dW_down, db_down
                int gAct = alloc(TensorKind.TEMPORARY, p + "mlp.act.out", t * f * d);
                grad(base + 10);
                grad(base + 11);
                free(s[11]);
                int gUp = alloc(TensorKind.TEMPORARY, p + "mlp.up.out", t * f * d);
                free(gAct);
                free(s[10]);
                int gLn2 = alloc(TensorKind.TEMPORARY, p + "ln2.out", t * h * d);
                grad(base + 8);
                grad(base + 9);
                free(gUp);
                int gx1 = alloc(TensorKind.TEMPORARY, p + "resid1", t * h * d);
                grad(base + 6);
                grad(base + 7);
                free(gLn2);
                free(s[8]);
                free(s[9]);
                free(gx);
                // attention: dL/d(ctx), dW_o, then dL/d(qkv)
                int gCtx = alloc(TensorKind.TEMPORARY, p + "attn.ctx", t * h * d);
                grad(base + 4);
                grad(base + 5);
                free(s[7]);
                int gQkv = alloc(TensorKind.TEMPORARY, p + "attn.qkv.out", t * 3 * h * d);
                if (s[4] >= 0) {
                    int gScores =
                            alloc(TensorKind.TEMPORARY, p + "attn.scores", (long) c.batch * c.heads * seq * seq * d);
                    free(gScores);
                    free(s[4]);
                }
                free(gCtx);
                free(s[5]);
                free(s[6]);
                free(s[3]);
                int gLn1 = alloc(TensorKind.TEMPORARY, p + "ln1.out", t * h * d);
                grad(base + 2);
                grad(base + 3);
                free(gQkv);
                int gx0 = alloc(TensorKind.TEMPORARY, p + "resid0", t * h * d);
                grad(base);
                grad(base + 1);
                free(gLn1);
                free(s[1]);
                free(s[2]);
                free(gx1);
                free(s[0]);
                gx = gx0;
            }
            grad(0);
            free(gx);
            free(ids);

            // ---- AdamW step
            if (!statesCreated) {
                for (int i = 0; i < params.size(); i++) {
                    long elements = params.get(i)[0];
                    live.set(alloc(
                            TensorKind.OPTIMIZER_STATE,
                            paramNames.get(i) + ".exp_avg",
                            elements * c.optimizerStateBytes));
                    live.set(alloc(
                            TensorKind.OPTIMIZER_STATE,
                            paramNames.get(i) + ".exp_avg_sq",
                            elements * c.optimizerStateBytes));
                }
                statesCreated = true;
            }
            for (int i = 0; i < params.size(); i++) {
                int scratch = alloc(
                        TensorKind.TEMPORARY,
                        paramNames.get(i) + ".adam_update",
                        params.get(i)[0] * c.optimizerStateBytes);
                free(scratch);
            }

            // ---- zero_grad
            if (!c.keepGradients) {
                for (int i = 0; i < gradIds.length; i++) {
                    free(gradIds[i]);
                    gradIds[i] = -1;
                }
            }
        }

        /** Allocates parameter i's gradient unless it is kept from an earlier step. */
        private void grad(int i) {
            if (gradIds[i] >= 0) {
                return;
            }
            int id = alloc(TensorKind.GRADIENT, paramNames.get(i) + ".grad", params.get(i)[0] * c.dtypeBytes);
            gradIds[i] = id;
            if (c.keepGradients) {
                live.set(id);
            }
        }

        private int alloc(TensorKind kind, String name, long bytes) {
            int slot = ops.alloc(bytes, 0, ops.length());
            ops.atSite(ops.site(frames.stack(kind, name)));
            kinds.add(kind);
            names.add(name);
            return slot;
        }

        private void free(int slot) {
            ops.free(slot, ops.length());
        }
    }
}
