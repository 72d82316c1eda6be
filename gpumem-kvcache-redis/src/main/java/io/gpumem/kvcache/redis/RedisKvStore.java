package io.gpumem.kvcache.redis;

import io.gpumem.kvcache.tier.RemoteKvStore;
import io.lettuce.core.ClientOptions;
import io.lettuce.core.RedisClient;
import io.lettuce.core.RedisURI;
import io.lettuce.core.SocketOptions;
import io.lettuce.core.TimeoutOptions;
import io.lettuce.core.api.StatefulRedisConnection;
import io.lettuce.core.api.sync.RedisCommands;
import io.lettuce.core.codec.ByteArrayCodec;
import java.time.Duration;

/**
 * The KV cache's remote tier on Redis: {@code GET}/{@code SET} of whole block records over one Lettuce
 * connection with binary keys and values.
 *
 * <p>Fail fast, never stall: commands time out after {@code timeout} (default 500 ms), connecting after
 * 10 s (the first connection of a JVM loads Netty and its handshake, which took over 2 s on a loaded
 * 2-core machine), and while the connection is down commands are
 * rejected at once instead of being queued until it comes back (Lettuce's default would hold them). Every failure surfaces as an unchecked
 * exception, which {@link io.gpumem.kvcache.tier.RemoteTier} counts and treats as a miss. Lettuce keeps
 * reconnecting in the background, so a server that returns is used again.
 *
 * <p>Least-recently-used eviction within a memory budget is the server's: run it with
 * {@code --maxmemory SIZE --maxmemory-policy allkeys-lru}.
 */
public final class RedisKvStore implements RemoteKvStore {
    private static final Duration CONNECT_TIMEOUT = Duration.ofSeconds(10);
    private final String uri;
    private final RedisClient client;
    private final StatefulRedisConnection<byte[], byte[]> connection;
    private final RedisCommands<byte[], byte[]> commands;

    private RedisKvStore(String uri, RedisClient client, StatefulRedisConnection<byte[], byte[]> connection) {
        this.uri = uri;
        this.client = client;
        this.connection = connection;
        this.commands = connection.sync();
    }

    /** Connects with a 500 ms command timeout. */
    public static RedisKvStore connect(String uri) {
        return connect(uri, Duration.ofMillis(500));
    }

    /**
     * Connects to {@code redis://host:port[/db]}.
     *
     * @throws IllegalArgumentException for a malformed URI
     * @throws io.lettuce.core.RedisException when the server cannot be reached
     */
    public static RedisKvStore connect(String uri, Duration timeout) {
        RedisURI parsed = RedisURI.create(uri);
        parsed.setTimeout(CONNECT_TIMEOUT);
        RedisClient client = RedisClient.create(parsed);
        client.setOptions(ClientOptions.builder()
                .autoReconnect(true)
                .disconnectedBehavior(ClientOptions.DisconnectedBehavior.REJECT_COMMANDS)
                .socketOptions(
                        SocketOptions.builder().connectTimeout(CONNECT_TIMEOUT).build())
                .timeoutOptions(TimeoutOptions.enabled(timeout))
                .build());
        try {
            return new RedisKvStore(uri, client, client.connect(ByteArrayCodec.INSTANCE));
        } catch (RuntimeException e) {
            client.shutdown(Duration.ZERO, Duration.ofSeconds(1));
            throw e;
        }
    }

    @Override
    public byte[] get(byte[] key) {
        return commands.get(key);
    }

    @Override
    public void put(byte[] key, byte[] value) {
        commands.set(key, value);
    }

    @Override
    public String describe() {
        return uri;
    }

    @Override
    public void close() {
        connection.close();
        client.shutdown(Duration.ZERO, Duration.ofSeconds(1));
    }
}
