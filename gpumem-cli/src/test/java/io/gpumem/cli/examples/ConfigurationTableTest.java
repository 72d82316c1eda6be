package io.gpumem.cli.examples;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpumem.cli.GpumemCli;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import picocli.CommandLine;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Model.OptionSpec;

/**
 * Holds the rule that everything a user can configure is documented in one table, with its default: every option of
 * every {@code gpumem} command (help and version switches aside) has a row in README-config.md's table whose first
 * cell names the option and whose "Where" cell names the command, with a non-empty default. A hidden option (an old
 * name kept working) needs no row of its own, but a row of its command must name it. A new option without its row, or
 * a row that no longer names the command, fails here with the option and command listed.
 */
class ConfigurationTableTest {

    private static final Path TABLE = Path.of("..", "README-config.md");

    /** One row of the table: its setting, where it applies, its default and its meaning (the four cells). */
    private record Row(String setting, String where, String defaultValue, String meaning) {}

    @Test
    void everyOptionOfEveryCommandHasARowNamingItsCommandAndDefault() throws IOException {
        List<Row> rows = rows(Files.readAllLines(TABLE));
        assertThat(rows).as("rows of the table in %s", TABLE).hasSizeGreaterThan(50);
        List<String> missing = new ArrayList<>();
        int options = 0;
        for (Map.Entry<String, CommandLine> command :
                GpumemCli.commandLine().getSubcommands().entrySet()) {
            CommandSpec spec = command.getValue().getCommandSpec();
            if (!spec.name().equals(command.getKey())) {
                continue; // an alias of a command already checked
            }
            for (OptionSpec option : spec.options()) {
                if (option.usageHelp() || option.versionHelp()) {
                    continue;
                }
                options++;
                String name = option.longestName();
                String where = "`" + spec.name() + "`";
                boolean documented = rows.stream()
                        .anyMatch(r -> r.where().contains(where)
                                && (option.hidden()
                                        ? r.meaning().contains("`" + name + "`")
                                        : names(r.setting(), name)
                                                && !r.defaultValue().isBlank()));
                if (!documented) {
                    missing.add(name + " of " + spec.name());
                }
            }
        }
        assertThat(options).as("options checked").isGreaterThan(80);
        assertThat(missing)
                .as("options without a row in %s naming their command and default", TABLE)
                .isEmpty();
    }

    /** Whether a setting cell such as {@code `--seq-min`, `--seq-max`} or {@code `--capacity SIZE`} names option. */
    private static boolean names(String setting, String option) {
        for (String part : setting.split("`", -1)) {
            if (part.equals(option) || part.startsWith(option + " ") || part.startsWith(option + "=")) {
                return true;
            }
        }
        return false;
    }

    /** The table's body rows (a markdown row: cells between pipes; the header and its rule skipped). */
    private static List<Row> rows(List<String> lines) {
        List<Row> rows = new ArrayList<>();
        for (String line : lines) {
            if (!line.startsWith("| ") || line.startsWith("| Setting ") || line.startsWith("|---")) {
                continue;
            }
            // a cell may hold an escaped pipe (`sim\|cuda`): split on the pipes that are not escaped
            String[] cells = line.split("(?<!\\\\)\\|", -1);
            if (cells.length > 5) {
                rows.add(new Row(cells[1].trim(), cells[2].trim(), cells[3].trim(), cells[4].trim()));
            }
        }
        return rows;
    }
}
