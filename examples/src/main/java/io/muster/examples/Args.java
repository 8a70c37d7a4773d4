package io.muster.examples;

import io.muster.internal.CommandOptions;
import java.util.Arrays;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;

/**
 * The examples' command lines, as every {@code muster} command reads them ({@link CommandOptions}):
 * {@code --name value} arguments with defaults, and {@code --flag}s that take no value ({@code "true"}
 * when given, {@code "false"} otherwise); an unknown name or a bad value is an error naming it.
 */
final class Args {
  private Args() {}

  static Map<String, String> parse(String[] args, Map<String, String> defaults) {
    return parse(args, defaults, Set.of());
  }

  static Map<String, String> parse(String[] args, Map<String, String> defaults, Set<String> flags) {
    return CommandOptions.parse(Arrays.asList(args), new TreeMap<>(defaults), new TreeSet<>(flags)).values();
  }

  /**
   * A failure's line: the message of Muster's own errors (the JDK's unchecked and I/O exceptions);
   * for another's (Spark's {@code SparkException}), its message's first line and its root cause's.
   */
  static String failure(Exception e) {
    if (e instanceof RuntimeException || e instanceof java.io.IOException) {
      return e.getMessage();
    }
    Throwable root = e;
    while (root.getCause() != null && root.getCause() != root) {
      root = root.getCause();
    }
    String line = firstLine(e.getMessage());
    return root == e ? line : line + " (" + root.getClass().getSimpleName() + ": " + firstLine(root.getMessage()) + ")";
  }

  private static String firstLine(String text) {
    return text == null ? "" : text.lines().findFirst().orElse("").strip();
  }

  static int nonNegativeInt(Map<String, String> values, String name) {
    return CommandOptions.nonNegativeInt(name, values.get(name));
  }

  static int positiveInt(Map<String, String> values, String name) {
    return CommandOptions.positiveInt(name, values.get(name));
  }

  /** Whether the arguments (those before a {@code --}) ask for the usage. */
  static boolean wantsHelp(String[] args) {
    for (String a : args) {
      if (a.equals("--")) {
        return false;
      }
      if (a.equals("--help") || a.equals("-h")) {
        return true;
      }
    }
    return false;
  }

  static float positiveFloat(Map<String, String> values, String name) {
    return CommandOptions.positiveFloat(name, values.get(name));
  }

  static long integer(Map<String, String> values, String name) {
    return CommandOptions.integer(name, values.get(name));
  }

  /**
   * The data option: empty, a Hadoop URI with a scheme other than {@code file:} (checked when it is
   * read), or a local file or directory that exists and is readable.
   */
  static String data(Map<String, String> values, String name) {
    String data = values.get(name);
    if (data.isEmpty() || (data.matches("[a-zA-Z][a-zA-Z0-9+.-]*:.*") && !data.startsWith("file:"))) {
      return data;
    }
    java.nio.file.Path path = data.startsWith("file:") ? java.nio.file.Path.of(java.net.URI.create(data))
        : java.nio.file.Path.of(data);
    if (!java.nio.file.Files.exists(path)) {
      throw new IllegalArgumentException(name + " must name a readable CSV or Parquet file, was '" + data
          + "' (no such file)");
    }
    if (!java.nio.file.Files.isReadable(path)) {
      throw new IllegalArgumentException(name + " must name a readable CSV or Parquet file, was '" + data
          + "' (not readable)");
    }
    return data;
  }
}
