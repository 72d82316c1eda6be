package io.gpumem.kvcache.manager;

/** Life cycle of a request in the KV cache. */
public enum RequestStatus {
    /** Not admitted yet: holds no blocks. */
    WAITING,
    /** Admitted: holds blocks. */
    RUNNING,
    /** Preempted by recompute: blocks returned (hashes kept in the pool), computed tokens reset to 0. */
    PREEMPTED,
    /** Preempted by swap: contents live in the host swap space until swapped back in. */
    SWAPPED,
    /** Freed; a second free is an error. */
    FINISHED
}
