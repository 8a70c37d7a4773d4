package io.muster.bench;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * A benchmark's {@code --name value} options over their defaults, checked before anything is
 * measured: an unknown option, a missing value or a value out of range is an
 * {@link IllegalArgumentException} whose message names the option and what it accepts.
 */
final class BenchArgs {
  private final Map<String, String> values;

  private BenchArgs(Map<String, String> values) {
    this.values = values;
  }

  static BenchArgs parse(List<String> args, Map<String, String> defaults) {
    Map<String, String> values = new LinkedHashMap<>(defaults);
    for (int i = 0; i < args.size(); i++) {
      String name = args.get(i);
      if (!defaults.containsKey(name)) {
        throw new IllegalArgumentException("unknown argument '" + name + "'; options: " + String.join(", ", defaults.keySet()));
      }
      if (i + 1 >= args.size()) {
        throw new IllegalArgumentException(name + " needs a value");
      }
      values.put(name, args.get(++i));
    }
    return new BenchArgs(values);
  }

  /** One of {@code choices}. */
  String oneOf(String name, List<String> choices) {
    String value = values.get(name);
    if (!choices.contains(value)) {
      throw new IllegalArgumentException(name + " must be one of " + String.join(", ", choices) + "; was '" + value + "'");
    }
    return value;
  }

  /** A positive integer. */
  int positiveInt(String name) {
    return positive(name, values.get(name), name + " must be a positive integer, was '" + values.get(name) + "'");
  }

  /** A comma-separated list of positive integers ({@code 2,4,8}); an empty value is an empty list. */
  List<Integer> positiveInts(String name) {
    String csv = values.get(name);
    List<Integer> out = new ArrayList<>();
    if (csv.isBlank()) {
      return out;
    }
    for (String item : csv.split(",", -1)) {
      out.add(positive(name, item.strip(),
          name + " must be positive integers separated by commas (such as 2,4,8), was '" + csv + "'"));
    }
    return out;
  }

  static int positive(String name, String value, String message) {
    try {
      int n = Integer.parseInt(value.strip());
      if (n > 0) {
        return n;
      }
    } catch (NumberFormatException e) {
      // the message below says what is accepted
    }
    throw new IllegalArgumentException(message);
  }
}
