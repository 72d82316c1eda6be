package io.gpumem.kvcache.manager;

import io.gpumem.kvcache.KvCacheException;
import io.gpumem.kvcache.memory.HostSwapSpace;
import java.util.Arrays;

/**
 * One sequence in the KV cache: its tokens (prompt, then generated), how many of them have KV computed,
 * its block table and the chained keys of its full blocks.
 *
 * <p>The engine appends sampled tokens ({@link #appendToken}) and advances the computed count after a
 * step ({@link #advanceComputed}); everything that touches blocks goes through {@link KvCacheManager}.
 * Arrays grow by doubling, so appending and allocating cost no garbage in steady state.
 *
 * <p>Invariants: {@code numComputed ≤ numTokens}; the block table covers at least the computed tokens
 * while RUNNING and is empty otherwise; the first {@code numCachedBlocks} table entries were cached (or
 * found cached) by this request; one may have lost its entry since, when a request sharing it left before
 * computing it.
 */
public final class KvRequest {
    private final String id;
    private final int adapterId;
    private final String salt;
    private final int priority;
    private final long arrival;
    private final int promptLength;

    int[] tokens;
    int numTokens;
    int numComputed;

    int[] table = new int[8];
    int numBlocks;
    int numCachedBlocks;
    /** Leading blocks already queued for the remote tier (write-through once computed). */
    int numPublished;

    long[] keyHi = new long[4];
    long[] keyLo = new long[4];
    int numKeyed;

    int[] pendingHit = new int[4];
    int[] pendingHitGeneration = new int[4];
    int pendingHitBlocks;
    boolean hasPendingLookup;

    RequestStatus status = RequestStatus.WAITING;
    int preemptions;
    HostSwapSpace.Handle swap;
    KvCacheManager owner;
    int saltId = -1;
    long saltFingerprint;

    private KvRequest(Builder b) {
        if (b.id == null || b.id.isEmpty()) {
            throw new KvCacheException("KvRequest: id must not be empty");
        }
        if (b.prompt == null || b.prompt.length == 0) {
            throw new KvCacheException("KvRequest " + b.id + ": prompt must have at least one token");
        }
        this.id = b.id;
        this.adapterId = b.adapterId;
        this.salt = b.salt;
        this.priority = b.priority;
        this.arrival = b.arrival;
        this.promptLength = b.prompt.length;
        this.tokens = Arrays.copyOf(b.prompt, Math.max(16, b.prompt.length * 2));
        this.numTokens = b.prompt.length;
    }

    /** A request with default extras (no adapter, no salt, priority 0, arrival 0). */
    public static KvRequest of(String id, int[] prompt) {
        return builder(id, prompt).build();
    }

    public static Builder builder(String id, int[] prompt) {
        return new Builder(id, prompt);
    }

    KvRequest copyForFork(String childId) {
        KvRequest c = new Builder(childId, Arrays.copyOf(tokens, promptLength))
                .adapter(adapterId)
                .salt(salt)
                .priority(priority)
                .arrival(arrival)
                .build();
        c.tokens = Arrays.copyOf(tokens, tokens.length);
        c.numTokens = numTokens;
        c.numComputed = numComputed;
        c.table = Arrays.copyOf(table, table.length);
        c.numBlocks = numBlocks;
        c.numCachedBlocks = numCachedBlocks;
        c.numPublished = numPublished;
        c.keyHi = Arrays.copyOf(keyHi, keyHi.length);
        c.keyLo = Arrays.copyOf(keyLo, keyLo.length);
        c.numKeyed = numKeyed;
        c.saltId = saltId;
        c.saltFingerprint = saltFingerprint;
        return c;
    }

    public String id() {
        return id;
    }

    public int adapterId() {
        return adapterId;
    }

    public String salt() {
        return salt;
    }

    public int priority() {
        return priority;
    }

    public long arrival() {
        return arrival;
    }

    public int promptLength() {
        return promptLength;
    }

    public int numTokens() {
        return numTokens;
    }

    public int numComputed() {
        return numComputed;
    }

    public int numOutputTokens() {
        return numTokens - promptLength;
    }

    public RequestStatus status() {
        return status;
    }

    public int preemptions() {
        return preemptions;
    }
    /** Blocks in the table. */
    public int numBlocks() {
        return numBlocks;
    }

    /** Block id at table position {@code index}. */
    public int block(int index) {
        if (index < 0 || index >= numBlocks) {
            throw new IndexOutOfBoundsException(
                    "block " + index + " of request " + id + " with " + numBlocks + " blocks");
        }
        return table[index];
    }

    /** A copy of the block table. */
    public int[] blockTable() {
        return Arrays.copyOf(table, numBlocks);
    }

    /** Token at position {@code index}. */
    public int token(int index) {
        if (index < 0 || index >= numTokens) {
            throw new IndexOutOfBoundsException(
                    "token " + index + " of request " + id + " with " + numTokens + " tokens");
        }
        return tokens[index];
    }

    /** Appends a sampled token. */
    public void appendToken(int token) {
        if (status == RequestStatus.FINISHED) {
            throw new KvCacheException("request " + id + " is finished; cannot append tokens");
        }
        if (numTokens == tokens.length) {
            tokens = Arrays.copyOf(tokens, tokens.length * 2);
        }
        tokens[numTokens++] = token;
    }

    /** Marks {@code n} more tokens as computed (their KV written); must stay within known tokens and slots. */
    public void advanceComputed(int n) {
        // long: an int sum wraps for a huge n and would pass the check, leaving numComputed negative
        if (n < 0 || (long) numComputed + n > numTokens) {
            throw new KvCacheException("request " + id + ": cannot advance computed tokens by " + n + " (" + numComputed
                    + " computed of " + numTokens + ")");
        }
        if (owner != null && (long) numComputed + n > (long) numBlocks * owner.blockSize()) {
            throw new KvCacheException("request " + id + ": " + (numComputed + n) + " computed tokens exceed its "
                    + numBlocks + " allocated blocks");
        }
        if (owner != null) {
            owner.kvWritten(this, numComputed, numComputed + n);
        }
        numComputed += n;
    }

    @Override
    public String toString() {
        return "KvRequest[" + id + ", " + status + ", tokens=" + numTokens + ", computed=" + numComputed + ", blocks="
                + numBlocks + "]";
    }

    /** Builder: adapter id (LoRA), tenant salt, priority (smaller = more important), arrival time. */
    public static final class Builder {
        private final String id;
        private final int[] prompt;
        private int adapterId;
        private String salt;
        private int priority;
        private long arrival;

        private Builder(String id, int[] prompt) {
            this.id = id;
            this.prompt = prompt;
        }

        public Builder adapter(int v) {
            adapterId = v;
            return this;
        }

        public Builder salt(String v) {
            salt = v;
            return this;
        }

        public Builder priority(int v) {
            priority = v;
            return this;
        }

        public Builder arrival(long v) {
            arrival = v;
            return this;
        }

        public KvRequest build() {
            return new KvRequest(this);
        }
    }
}
