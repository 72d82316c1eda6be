package io.gpumem.cli.trace;

import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonGenerator;
import java.io.IOException;
import java.io.StringWriter;
import java.io.UncheckedIOException;

/** One-line JSON output through jackson-core's streaming generator. */
final class Json {

    private static final JsonFactory FACTORY = new JsonFactory();

    private Json() {}

    interface Body {
        void write(JsonGenerator g) throws IOException;
    }

    static String line(Body body) {
        StringWriter w = new StringWriter();
        try (JsonGenerator g = FACTORY.createGenerator(w)) {
            body.write(g);
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
        return w.toString();
    }
}
