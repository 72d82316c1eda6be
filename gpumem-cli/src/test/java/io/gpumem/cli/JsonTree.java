package io.gpumem.cli;

import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.JsonToken;
import java.io.IOException;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * The tests' reader of the commands' {@code --json} output: one JSON value as maps (in key order), lists, strings,
 * longs, doubles, booleans and {@code null}.
 */
public final class JsonTree {

    private JsonTree() {}

    /** Parses one JSON value. */
    public static Object parse(String text) throws IOException {
        try (JsonParser p = new JsonFactory().createParser(text)) {
            p.nextToken();
            return value(p);
        }
    }

    private static Object value(JsonParser p) throws IOException {
        JsonToken t = p.currentToken();
        return switch (t) {
            case START_OBJECT -> {
                Map<String, Object> m = new LinkedHashMap<>();
                while (p.nextToken() == JsonToken.FIELD_NAME) {
                    String name = p.currentName();
                    p.nextToken();
                    m.put(name, value(p));
                }
                yield m;
            }
            case START_ARRAY -> {
                List<Object> l = new ArrayList<>();
                while (p.nextToken() != JsonToken.END_ARRAY) {
                    l.add(value(p));
                }
                yield l;
            }
            case VALUE_NUMBER_INT -> p.getLongValue();
            case VALUE_NUMBER_FLOAT -> p.getDoubleValue();
            case VALUE_TRUE, VALUE_FALSE -> p.getBooleanValue();
            case VALUE_NULL -> null;
            default -> p.getText();
        };
    }
}
