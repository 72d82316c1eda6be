package io.gpumem.metrics;

import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpServer;
import io.micrometer.prometheusmetrics.PrometheusMeterRegistry;
import java.io.IOException;
import java.io.OutputStream;
import java.net.BindException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;

/**
 * A Prometheus scrape endpoint: {@code GET /metrics} on 127.0.0.1 answers the registry's text exposition
 * ({@code text/plain; version=0.0.4}); anything else gets 404 (405 for another method), and a scrape that throws (a
 * meter whose figure cannot be read) gets 500 naming the exception. Served by the JDK's
 * {@code com.sun.net.httpserver} on one daemon thread, so it never keeps the JVM alive. Loopback only: exposing
 * it further is the deployment's choice (a proxy), not this class's.
 */
public final class PrometheusEndpoint implements AutoCloseable {
    /** The exposition format version Prometheus's text parser expects. */
    public static final String CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8";

    private final HttpServer server;
    private final ExecutorService executor;

    private PrometheusEndpoint(HttpServer server, ExecutorService executor) {
        this.server = server;
        this.executor = executor;
    }

    /**
     * Starts serving {@code registry} on 127.0.0.1:{@code port} ({@code 0}: any free port, see {@link #port()}).
     *
     * @throws IOException naming the address when the port cannot be bound (a {@link BindException} when it is in use,
     *     or not permitted)
     */
    public static PrometheusEndpoint start(PrometheusMeterRegistry registry, int port) throws IOException {
        if (port < 0 || port > 65535) {
            throw new IllegalArgumentException("port must be in 0..65535, got " + port);
        }
        HttpServer server;
        try {
            server = HttpServer.create(new InetSocketAddress(InetAddress.getLoopbackAddress(), port), 0);
        } catch (BindException e) {
            // the JDK's message names no address ("Address already in use"): a caller must not have to guess which
            BindException named = new BindException("cannot listen on 127.0.0.1:" + port + ": " + e.getMessage());
            named.initCause(e);
            throw named;
        } catch (IOException e) {
            throw new IOException("cannot listen on 127.0.0.1:" + port + ": " + e.getMessage(), e);
        }
        ExecutorService executor = Executors.newSingleThreadExecutor(r -> {
            Thread t = new Thread(r, "gpumem-metrics-http");
            t.setDaemon(true);
            return t;
        });
        server.setExecutor(executor);
        server.createContext("/", exchange -> handle(exchange, registry));
        server.start();
        return new PrometheusEndpoint(server, executor);
    }

    private static void handle(HttpExchange exchange, PrometheusMeterRegistry registry) throws IOException {
        try (exchange) {
            String path = exchange.getRequestURI().getPath();
            if (!"/metrics".equals(path)) {
                send(exchange, 404, "not found: the metrics are at /metrics\n");
            } else if (!"GET".equals(exchange.getRequestMethod()) && !"HEAD".equals(exchange.getRequestMethod())) {
                exchange.getResponseHeaders().set("Allow", "GET, HEAD");
                send(exchange, 405, "method not allowed\n");
            } else {
                String text;
                try {
                    text = registry.scrape();
                } catch (RuntimeException e) {
                    // a meter whose figure cannot be read (a stats supplier that throws) fails the scrape: say so,
                    // where the connection used to close with no answer at all
                    send(exchange, 500, "scrape failed: " + e + "\n");
                    return;
                }
                exchange.getResponseHeaders().set("Content-Type", CONTENT_TYPE);
                byte[] body = text.getBytes(StandardCharsets.UTF_8);
                if ("HEAD".equals(exchange.getRequestMethod())) {
                    exchange.sendResponseHeaders(200, -1);
                } else {
                    exchange.sendResponseHeaders(200, body.length);
                    try (OutputStream out = exchange.getResponseBody()) {
                        out.write(body);
                    }
                }
            }
        }
    }

    private static void send(HttpExchange exchange, int status, String text) throws IOException {
        byte[] body = text.getBytes(StandardCharsets.UTF_8);
        exchange.getResponseHeaders().set("Content-Type", "text/plain; charset=utf-8");
        exchange.sendResponseHeaders(status, body.length);
        try (OutputStream out = exchange.getResponseBody()) {
            out.write(body);
        }
    }

    /** The port the endpoint listens on. */
    public int port() {
        return server.getAddress().getPort();
    }

    /** The scrape URL. */
    public String url() {
        return "http://127.0.0.1:" + port() + "/metrics";
    }

    @Override
    public void close() {
        server.stop(0);
        executor.shutdownNow();
    }
}
