package io.gpumem.config;

import java.util.ArrayList;
import java.util.List;

/**
 * Splits a {@code PYTORCH_CUDA_ALLOC_CONF} string into tokens the way PyTorch's {@code lexArgs} does.
 *
 * <p>Algorithm: one pass over the characters. Spaces are dropped wherever they occur (so {@code "max split"}
 * is the single word {@code maxsplit}); each of {@code , : [ ]} ends the current word and is a token of
 * its own; every other character accumulates into the current word. Only the ASCII space is dropped, as in
 * PyTorch: tabs and newlines stay inside words, where they make the option unrecognised.
 */
final class ConfigLexer {
    private ConfigLexer() {}

    static List<String> lex(String conf) {
        List<String> tokens = new ArrayList<>();
        StringBuilder word = new StringBuilder();
        for (int i = 0; i < conf.length(); i++) {
            char ch = conf.charAt(i);
            if (ch == ',' || ch == ':' || ch == '[' || ch == ']') {
                if (!word.isEmpty()) {
                    tokens.add(word.toString());
                    word.setLength(0);
                }
                tokens.add(String.valueOf(ch));
            } else if (ch != ' ') {
                word.append(ch);
            }
        }
        if (!word.isEmpty()) {
            tokens.add(word.toString());
        }
        return tokens;
    }
}
