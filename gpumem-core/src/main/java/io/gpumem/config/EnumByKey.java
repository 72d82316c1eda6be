package io.gpumem.config;

import java.util.HashMap;
import java.util.Map;
import java.util.function.Function;

/**
 * The one lookup of an enum constant by the key the outside world names it with (a driver's numeric error code, the
 * action name a snapshot file writes): built once from the constants, it maps each key to its constant and every
 * other key to a fallback constant that stands for "not known to this version".
 *
 * <p>Invariants: no two constants share a key (checked when built); the fallback is never looked up by its own key,
 * so an unknown key and the fallback's key give the same answer.
 */
public final class EnumByKey<K, E extends Enum<E>> {

    private final Map<K, E> byKey = new HashMap<>();
    private final E fallback;

    private EnumByKey(E[] constants, Function<E, K> key, E fallback) {
        this.fallback = fallback;
        for (E e : constants) {
            if (e != fallback) {
                E previous = byKey.put(key.apply(e), e);
                if (previous != null) {
                    throw new IllegalArgumentException(fallback.getDeclaringClass()
                                    .getSimpleName() + "." + previous + " and " + e + " share the key " + key.apply(e));
                }
            }
        }
    }

    /** The lookup of {@code constants} by {@code key}, answering {@code fallback} for keys no constant has. */
    public static <K, E extends Enum<E>> EnumByKey<K, E> of(E[] constants, Function<E, K> key, E fallback) {
        return new EnumByKey<>(constants, key, fallback);
    }

    /** The constant whose key is {@code key}, or the fallback. */
    public E get(K key) {
        return byKey.getOrDefault(key, fallback);
    }
}
