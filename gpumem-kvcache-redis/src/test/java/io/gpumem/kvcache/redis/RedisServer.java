package io.gpumem.kvcache.redis;

import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.io.IOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.TimeUnit;

/**
 * A throw-away {@code redis-server} for tests: a free port on 127.0.0.1, persistence off, a 64 MiB
 * least-recently-used budget, its working directory under a temporary directory. {@link #start} skips
 * the calling test (saying why) when the server is not installed or does not answer within 5 s.
 */
public final class RedisServer implements AutoCloseable {
    private final Process process;
    private final int port;

    private RedisServer(Process process, int port) {
        this.process = process;
        this.port = port;
    }

    public static RedisServer start(Path workDir) throws IOException, InterruptedException {
        String binary = System.getenv().getOrDefault("GPUMEM_REDIS_SERVER", "redis-server");
        int port;
        try (ServerSocket probe = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
            port = probe.getLocalPort();
        }
        Files.createDirectories(workDir);
        Process p;
        try {
            p = new ProcessBuilder(List.of(
                            binary,
                            "--port",
                            Integer.toString(port),
                            "--bind",
                            "127.0.0.1",
                            "--save",
                            "",
                            "--appendonly",
                            "no",
                            "--maxmemory",
                            "64mb",
                            "--maxmemory-policy",
                            "allkeys-lru",
                            "--dir",
                            workDir.toString()))
                    .redirectErrorStream(true)
                    .redirectOutput(workDir.resolve("redis.log").toFile())
                    .start();
        } catch (IOException e) {
            assumeTrue(
                    false,
                    "redis-server not available (" + e.getMessage() + "); install Debian's redis-server package");
            throw e;
        }
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(5);
        while (System.nanoTime() < deadline) {
            if (!p.isAlive()) {
                assumeTrue(false, "redis-server exited at start: " + Files.readString(workDir.resolve("redis.log")));
            }
            if (pings(port)) {
                System.out.println("redis-server on 127.0.0.1:" + port);
                return new RedisServer(p, port);
            }
            Thread.sleep(50);
        }
        p.destroyForcibly();
        assumeTrue(false, "redis-server did not answer on port " + port + " within 5 s");
        throw new IllegalStateException("unreachable");
    }

    private static boolean pings(int port) {
        try (Socket s = new Socket()) {
            s.connect(new InetSocketAddress(InetAddress.getLoopbackAddress(), port), 200);
            s.getOutputStream().write("PING\r\n".getBytes(StandardCharsets.US_ASCII));
            byte[] buf = new byte[7];
            int n = s.getInputStream().read(buf);
            return n > 0 && new String(buf, 0, n, StandardCharsets.US_ASCII).startsWith("+PONG");
        } catch (IOException e) {
            return false;
        }
    }

    public int port() {
        return port;
    }

    public String uri() {
        return "redis://127.0.0.1:" + port;
    }

    /** Kills the server at once (SIGKILL), as a crash would, and waits until it is gone. */
    public void kill() throws InterruptedException {
        process.destroyForcibly();
        process.waitFor(10, TimeUnit.SECONDS);
    }

    /**
     * Stops the server, killing it when it has not exited 5 s after being asked to. An interrupt while waiting
     * kills it at once and stays set on the thread (no {@code InterruptedException} from a resource's close).
     */
    @Override
    public void close() {
        if (process.isAlive()) {
            process.destroy();
            if (!exitsWithin(5)) {
                process.destroyForcibly();
                exitsWithin(10);
            }
        }
    }

    /** Whether the server exits within {@code seconds}; false at once when interrupted (the interrupt stays set). */
    private boolean exitsWithin(long seconds) {
        try {
            return process.waitFor(seconds, TimeUnit.SECONDS);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return false;
        }
    }
}
