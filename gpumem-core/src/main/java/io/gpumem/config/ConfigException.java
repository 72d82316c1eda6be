package io.gpumem.config;

/** A malformed {@code PYTORCH_CUDA_ALLOC_CONF} string; {@link #key()} names the offending option. */
public class ConfigException extends IllegalArgumentException {
    private final String key;

    public ConfigException(String key, String message) {
        super(message);
        this.key = key;
    }

    /** The option the error is about, or "" when the string could not be tokenised at all. */
    public String key() {
        return key;
    }
}
