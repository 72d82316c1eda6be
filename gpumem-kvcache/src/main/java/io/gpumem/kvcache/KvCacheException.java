package io.gpumem.kvcache;

/**
 * A KV-cache operation was refused because of bad input or an impossible configuration: a request freed
 * twice, tokens beyond the model length, a budget too small for one request, a foreign request. The
 * message names the request, field or figure at fault. When this is thrown, no pool state has changed.
 */
public class KvCacheException extends RuntimeException {
    public KvCacheException(String message) {
        super(message);
    }

    public KvCacheException(String message, Throwable cause) {
        super(message, cause);
    }
}
