package io.muster.examples;

import java.util.HashMap;
import java.util.Map;

/** {@code --name value} arguments with defaults; an unknown name or a bad value is an error naming it. */
final class Args {
  private Args() {}

  static Map<String, String> parse(String[] args, Map<String, String> defaults) {
    Map<String, String> values = new HashMap<>(defaults);
    for (int i = 0; i < args.length; i++) {
      if (!defaults.containsKey(args[i])) {
        throw new IllegalArgumentException("unknown argument '" + args[i] + "'; arguments: " + defaults.keySet());
      }
      if (i + 1 >= args.length) {
        throw new IllegalArgumentException(args[i] + " needs a value");
      }
      values.put(args[i], args[++i]);
    }
    return values;
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
