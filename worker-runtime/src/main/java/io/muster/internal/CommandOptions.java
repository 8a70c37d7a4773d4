package io.muster.internal;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * The command line of every {@code muster} command: {@code --name value} options and
 * {@code --flag}s, anything else an {@link IllegalArgumentException} naming it and the options
 * there are; each value checked by the getter that reads it, the error naming the option and what
 * it takes. An option given twice keeps its last value ({@link #get}) and all of them
 * ({@link #getAll}).
 */
public final class CommandOptions {
  private final Map<String, String> defaults;
  private final Set<String> flags;
  private final Map<String, List<String>> given = new LinkedHashMap<>();

  private CommandOptions(Map<String, String> defaults, Set<String> flags) {
    this.defaults = defaults;
    this.flags = flags;
  }

  /** Options that take a value and have no default, in the order the usage lists them, and flags. */
  public static CommandOptions parse(List<String> args, Set<String> valued, Set<String> flags) {
    Map<String, String> noDefaults = new LinkedHashMap<>();
    valued.forEach(name -> noDefaults.put(name, null));
    return parse(args, noDefaults, flags);
  }

  /**
   * @param valued the options that take a value, each with its default (null for none), in the order
   *     the usage lists them
   */
  public static CommandOptions parse(List<String> args, Map<String, String> valued, Set<String> flags) {
    CommandOptions options = new CommandOptions(valued, flags);
    for (int i = 0; i < args.size(); i++) {
      String arg = args.get(i);
      if (flags.contains(arg)) {
        options.given.computeIfAbsent(arg, a -> new ArrayList<>()).add("true");
      } else if (valued.containsKey(arg)) {
        if (i + 1 >= args.size()) {
          throw new IllegalArgumentException(arg + " needs a value");
        }
        options.given.computeIfAbsent(arg, a -> new ArrayList<>()).add(args.get(++i));
      } else {
        List<String> known = new ArrayList<>(valued.keySet());
        known.addAll(flags);
        throw new IllegalArgumentException("unknown argument '" + arg + "'; options: " + String.join(", ", known));
      }
    }
    return options;
  }

  /** The option's last value, or its default. */
  public String get(String name) {
    List<String> values = given.get(name);
    return values == null ? defaults.get(name) : values.get(values.size() - 1);
  }

  /** The option's last value, or {@code fallback}. */
  public String get(String name, String fallback) {
    return has(name) ? get(name) : fallback;
  }

  public List<String> getAll(String name) {
    return given.getOrDefault(name, List.of());
  }

  /** Whether the option or flag was given. */
  public boolean has(String name) {
    return given.containsKey(name);
  }

  /** Every option's value (given, or its default) and every flag's ({@code true} or {@code false}). */
  public Map<String, String> values() {
    Map<String, String> values = new LinkedHashMap<>();
    defaults.keySet().forEach(name -> values.put(name, get(name)));
    flags.forEach(flag -> values.put(flag, Boolean.toString(has(flag))));
    return values;
  }

  public int positiveInt(String name) {
    return positiveInt(name, get(name));
  }

  /** {@code value}, given for {@code name}, as an integer above 0. */
  public static int positiveInt(String name, String value) {
    Integer n = parseInt(value);
    if (n == null || n <= 0) {
      throw new IllegalArgumentException(name + " must be a positive integer, was '" + value + "'");
    }
    return n;
  }

  /** {@code value}, given for {@code name}, as an integer of 0 or more. */
  public static int nonNegativeInt(String name, String value) {
    Integer n = parseInt(value);
    if (n == null || n < 0) {
      throw new IllegalArgumentException(name + " must be an integer >= 0, was '" + value + "'");
    }
    return n;
  }

  /** {@code value}, given for {@code name}, as a finite number above 0. */
  public static float positiveFloat(String name, String value) {
    try {
      float v = Float.parseFloat(value);
      if (Float.isFinite(v) && v > 0) {
        return v;
      }
    } catch (NumberFormatException | NullPointerException e) {
      // reported below
    }
    throw new IllegalArgumentException(name + " must be a finite number > 0, was '" + value + "'");
  }

  /** {@code value}, given for {@code name}, as a long. */
  public static long integer(String name, String value) {
    try {
      return Long.parseLong(value);
    } catch (NumberFormatException e) {
      throw new IllegalArgumentException(name + " must be an integer, was '" + value + "'");
    }
  }

  /** The option's value, one of {@code choices}. */
  public String oneOf(String name, List<String> choices) {
    String value = get(name);
    if (!choices.contains(value)) {
      throw new IllegalArgumentException(name + " must be one of " + String.join(", ", choices) + "; was '" + value
          + "'");
    }
    return value;
  }

  /** The option's value as positive integers separated by commas ({@code 2,4,8}); an empty value is an empty list. */
  public List<Integer> positiveInts(String name) {
    String csv = get(name);
    List<Integer> out = new ArrayList<>();
    if (csv.isBlank()) {
      return out;
    }
    for (String item : csv.split(",", -1)) {
      Integer n = parseInt(item.strip());
      if (n == null || n <= 0) {
        throw new IllegalArgumentException(name + " must be positive integers separated by commas (such as 2,4,8), "
            + "was '" + csv + "'");
      }
      out.add(n);
    }
    return out;
  }

  private static Integer parseInt(String value) {
    try {
      return Integer.parseInt(value.strip());
    } catch (NumberFormatException | NullPointerException e) {
      return null;
    }
  }
}
