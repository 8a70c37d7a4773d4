package io.muster.examples;

import java.util.HashMap;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;

/**
 * {@code --name value} arguments with defaults, and {@code --flag}s that take no value ({@code "true"}
 * when given, {@code "false"} otherwise); an unknown name or a bad value is an error naming it.
 */
final class Args {
  private Args() {}

  static Map<String, String> parse(String[] args, Map<String, String> defaults) {
    return parse(args, defaults, Set.of());
  }

  static Map<String, String> parse(String[] args, Map<String, String> defaults, Set<String> flags) {
    Map<String, String> values = new HashMap<>(defaults);
    flags.forEach(flag -> values.put(flag, "false"));
    for (int i = 0; i < args.length; i++) {
      if (flags.contains(args[i])) {
        values.put(args[i], "true");
        continue;
      }
      if (!defaults.containsKey(args[i])) {
        Set<String> known = new TreeSet<>(defaults.keySet());
        known.addAll(flags);
        throw new IllegalArgumentException("unknown argument '" + args[i] + "'; arguments: " + known);
      }
      if (i + 1 >= args.length) {
        throw new IllegalArgumentException(args[i] + " needs a value");
      }
      values.put(args[i], args[++i]);
    }
    return values;
  }

  static int nonNegativeInt(Map<String, String> values, String name) {
    try {
      int v = Integer.parseInt(values.get(name));
      if (v >= 0) {
        return v;
      }
    } catch (NumberFormatException e) {
      // reported below
    }
    throw new IllegalArgumentException(name + " must be an integer >= 0, was '" + values.get(name) + "'");
  }

  static int positiveInt(Map<String, String> values, String name) {
    try {
      int v = Integer.parseInt(values.get(name));
      if (v > 0) {
        return v;
      }
    } catch (NumberFormatException e) {
      // reported below
    }
    throw new IllegalArgumentException(name + " must be a positive integer, was '" + values.get(name) + "'");
  }
}
