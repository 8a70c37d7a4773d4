package io.muster.examples;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.stream.Stream;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * The command line's contract for demo, spark-run and example: {@code --help} prints the usage and
 * exits 0; a usage error is one line naming the option and what it accepts, exit 2, before Spark
 * or any worker starts (the session supplier here fails the test when asked).
 */
class CommandContractTest {

  private record Outcome(int code, String out, String err) {}

  private interface Command {
    int run(String[] args, PrintStream out, PrintStream err) throws Exception;
  }

  private static final Command DEMO = (args, out, err) -> SparkDemo.run(args, out, err, options -> {
    throw new AssertionError("Spark was asked for");
  });
  private static final Command SPARK_RUN = (args, out, err) -> SparkRun.run(args, out, err, trainer -> {
    throw new AssertionError("Spark was asked for");
  });
  private static final Command EXAMPLE = Examples::run;

  private static Outcome run(Command command, String... args) throws Exception {
    ByteArrayOutputStream out = new ByteArrayOutputStream();
    ByteArrayOutputStream err = new ByteArrayOutputStream();
    int code = command.run(args, new PrintStream(out, true), new PrintStream(err, true));
    return new Outcome(code, out.toString(StandardCharsets.UTF_8), err.toString(StandardCharsets.UTF_8));
  }

  static Stream<Arguments> usageErrors() {
    return Stream.of(
        Arguments.of("demo", DEMO, new String[] {"--workers", "0"},
            "muster demo: --workers must be a positive integer, was '0'"),
        Arguments.of("demo", DEMO, new String[] {"--learning-rate", "xyz"},
            "muster demo: --learning-rate must be a finite number > 0, was 'xyz'"),
        Arguments.of("demo", DEMO, new String[] {"--learning-rate", "NaN"},
            "muster demo: --learning-rate must be a finite number > 0, was 'NaN'"),
        Arguments.of("demo", DEMO, new String[] {"--data", "/nonexistent/digits.csv"},
            "muster demo: --data must name a readable CSV or Parquet file, was '/nonexistent/digits.csv' (no such file)"),
        Arguments.of("demo", DEMO, new String[] {"--seed", "seven"}, "muster demo: --seed must be an integer, was 'seven'"),
        Arguments.of("demo", DEMO, new String[] {"--workers", "3", "--global-batch", "64"},
            "muster demo: --global-batch 64 must be a multiple of --workers 3"),
        Arguments.of("demo", DEMO, new String[] {"--epochs"}, "muster demo: --epochs needs a value"),
        Arguments.of("spark-run", SPARK_RUN, new String[] {"--workers", "0", "--", "true"},
            "muster spark-run: --workers must be a positive integer, was '0'"),
        Arguments.of("spark-run", SPARK_RUN, new String[] {"--data", "/nonexistent/rows.parquet", "--", "true"},
            "muster spark-run: --data must name a readable CSV or Parquet file, was '/nonexistent/rows.parquet' "
                + "(no such file)"),
        Arguments.of("spark-run", SPARK_RUN, new String[] {"--workers", "2"},
            "muster spark-run: give the command after '--', e.g. muster spark-run --workers 2 -- python3 train.py "
                + "(muster spark-run --help)"),
        Arguments.of("spark-run", SPARK_RUN, new String[] {"--workers", "2", "--"},
            "muster spark-run: give the command after '--', e.g. muster spark-run --workers 2 -- python3 train.py "
                + "(muster spark-run --help)"),
        Arguments.of("spark-run", SPARK_RUN, new String[] {"--rerun", "always", "--", "true"},
            "muster spark-run: --rerun must be one of cluster-failures, any-failure, was 'always'"),
        Arguments.of("spark-run", SPARK_RUN, new String[] {"--preemption-signal", "KILL", "--", "true"},
            "muster spark-run: 'KILL' is not a signal a command can be sent to save and leave; use one of "
                + "TERM, INT, HUP, QUIT, USR1, USR2, PWR, ALRM, XCPU"),
        Arguments.of("spark-run", SPARK_RUN, new String[] {"--preemption-exit-code", "0", "--", "true"},
            "muster spark-run: --preemption-exit-code must be a positive integer, was '0'"),
        Arguments.of("example", EXAMPLE, new String[] {"softmax", "--workers", "0"},
            "muster example softmax: --workers must be a positive integer, was '0'"),
        Arguments.of("example", EXAMPLE, new String[] {"softmax", "--learning-rate", "Infinity"},
            "muster example softmax: --learning-rate must be a finite number > 0, was 'Infinity'"),
        Arguments.of("example", EXAMPLE, new String[] {"softmax", "--preempt-after", "3"},
            "muster example softmax: --preempt-after needs --out: the workers save there when preempted"),
        Arguments.of("example", EXAMPLE, new String[] {"softmax", "--out", "/tmp/x", "--preempt-after", "0"},
            "muster example softmax: --preempt-after must be a finite number > 0, was '0'"),
        Arguments.of("example", EXAMPLE, new String[] {"linear"},
            "muster example: unknown example 'linear'; the examples: softmax, share, placement, increment, "
                + "wait-for-chief, late-task, leave-and-return, train (muster example --help)"));
  }

  @ParameterizedTest(name = "{0} {2}")
  @MethodSource("usageErrors")
  void aUsageErrorIsOneLineNamingTheOptionExitTwo(String name, Command command, String[] args, String line)
      throws Exception {
    Outcome o = run(command, args);
    assertEquals(2, o.code(), o.err());
    assertEquals(line + "\n", o.err());
    assertEquals("", o.out());
  }

  static Stream<Arguments> helps() {
    return Stream.of(Arguments.of("demo", DEMO, new String[] {"--help"}, "usage: muster demo "),
        Arguments.of("spark-run", SPARK_RUN, new String[] {"--help"}, "usage: muster spark-run "),
        Arguments.of("example", EXAMPLE, new String[] {"--help"}, "usage: muster example softmax "),
        Arguments.of("example", EXAMPLE, new String[] {"softmax", "--help"}, "usage: muster example softmax "));
  }

  @ParameterizedTest(name = "{0} {2}")
  @MethodSource("helps")
  void helpPrintsTheUsageAndExitsZero(String name, Command command, String[] args, String start) throws Exception {
    Outcome o = run(command, args);
    assertEquals(0, o.code(), o.err());
    assertTrue(o.out().startsWith(start), o.out());
    assertEquals("", o.err());
  }
}
