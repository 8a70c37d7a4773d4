package io.muster.cli;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * A command's {@code --name value} options and {@code --flag}s; anything else is a usage error. An
 * option given twice keeps its last value ({@link #get}) and all of them ({@link #getAll}).
 */
final class Options {
  private final Map<String, List<String>> values = new HashMap<>();

  private Options() {}

  static Options parse(List<String> args, Set<String> valued, Set<String> flags) {
    Options options = new Options();
    for (int i = 0; i < args.size(); i++) {
      String arg = args.get(i);
      if (flags.contains(arg)) {
        options.values.computeIfAbsent(arg, a -> new ArrayList<>()).add("true");
      } else if (valued.contains(arg)) {
        if (i + 1 >= args.size()) {
          throw new UsageException(arg + " needs a value");
        }
        options.values.computeIfAbsent(arg, a -> new ArrayList<>()).add(args.get(++i));
      } else {
        throw new UsageException("unknown argument '" + arg + "'; options: " + String.join(", ", valued)
            + (flags.isEmpty() ? "" : ", " + String.join(", ", flags)));
      }
    }
    return options;
  }

  String get(String name, String defaultValue) {
    List<String> given = values.get(name);
    return given == null ? defaultValue : given.get(given.size() - 1);
  }

  List<String> getAll(String name) {
    return values.getOrDefault(name, List.of());
  }

  boolean has(String flag) {
    return values.containsKey(flag);
  }
}
