package io.muster.bench;

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
 * {@code ./muster bench}'s contract: {@code --help} prints the usage (exit 0); a benchmark's own bad
 * option is one line naming it and what it accepts, exit 2, before anything is measured (each case
 * would start processes, a MiniDFSCluster or Spark if it got that far, and returns in milliseconds).
 */
class BenchCommandTest {

  private record Outcome(int code, String out, String err) {}

  private static Outcome run(String... args) {
    ByteArrayOutputStream out = new ByteArrayOutputStream();
    ByteArrayOutputStream err = new ByteArrayOutputStream();
    int code = Bench.run(args, new PrintStream(out, true), new PrintStream(err, true));
    return new Outcome(code, out.toString(StandardCharsets.UTF_8), err.toString(StandardCharsets.UTF_8));
  }

  static Stream<Arguments> usageErrors() {
    return Stream.of(
        Arguments.of(new String[] {}, "muster bench: which benchmark?; the benchmarks: coordination, coordinator, "
            + "allreduce, checkpoint, spark, yarn (muster bench --help)"),
        Arguments.of(new String[] {"gpu"}, "muster bench: unknown benchmark 'gpu'; the benchmarks: coordination, "
            + "coordinator, allreduce, checkpoint, spark, yarn (muster bench --help)"),
        Arguments.of(new String[] {"coordinator"}, "muster bench coordinator: needs W (workers) and optionally ROUNDS, "
            + "was []"),
        Arguments.of(new String[] {"coordinator", "0"},
            "muster bench coordinator: W (workers) must be a positive integer, was '0'"),
        Arguments.of(new String[] {"coordination", "--procs", "2"},
            "muster bench coordination: unknown argument '--procs'; options: --processes, --threads, --seconds"),
        Arguments.of(new String[] {"coordination", "--processes", "2,x"},
            "muster bench coordination: --processes must be positive integers separated by commas (such as 2,4,8), "
                + "was '2,x'"),
        Arguments.of(new String[] {"coordination", "--seconds", "0"},
            "muster bench coordination: --seconds must be a positive integer, was '0'"),
        Arguments.of(new String[] {"coordination", "--threads"}, "muster bench coordination: --threads needs a value"),
        Arguments.of(new String[] {"allreduce", "2"}, "muster bench allreduce: needs N (ranks) and at least one SIZE: "
            + "muster bench allreduce [--table] [--tls] [--first-steps [--warm-up LIST]] N SIZE..."),
        Arguments.of(new String[] {"allreduce", "two", "4K"},
            "muster bench allreduce: N (ranks) must be an integer in 1..64, was 'two'"),
        Arguments.of(new String[] {"allreduce", "65", "4K"},
            "muster bench allreduce: N (ranks) must be an integer in 1..64, was '65'"),
        Arguments.of(new String[] {"allreduce", "2", "4Q"}, "muster bench allreduce: SIZE must be a positive multiple "
            + "of 4 bytes up to 1G (such as 4096, 4K, 64M), was '4Q'"),
        Arguments.of(new String[] {"allreduce", "2", "6"}, "muster bench allreduce: SIZE must be a positive multiple "
            + "of 4 bytes up to 1G (such as 4096, 4K, 64M), was '6'"),
        Arguments.of(new String[] {"allreduce", "--gpu", "2", "4K"},
            "muster bench allreduce: unknown argument '--gpu'; options: --table, --tls, --first-steps, --warm-up"),
        Arguments.of(new String[] {"allreduce", "--first-steps", "--table", "2", "4K"},
            "muster bench allreduce: --first-steps goes without --table and --tls: it measures a fresh gang's first "
                + "all-reduces, without the table's baseline or TLS"),
        Arguments.of(new String[] {"allreduce", "--warm-up", "loopback", "2", "4K"},
            "muster bench allreduce: --warm-up goes with --first-steps: it is about a fresh gang's first all-reduces"),
        Arguments.of(new String[] {"allreduce", "--first-steps", "--warm-up", "loopback:many", "2", "4K"},
            "muster bench allreduce: --warm-up takes a comma list of none, loopback and loopback:OPS, or both "
                + "(none,loopback); was 'loopback:many'"),
        Arguments.of(new String[] {"checkpoint", "big"},
            "muster bench checkpoint: the checkpoint sizes must be positive integers (MiB), was 'big'"),
        Arguments.of(new String[] {"checkpoint", "--size", "64"}, "muster bench checkpoint: unknown argument '--size'; "
            + "the checkpoint sizes must be positive integers (MiB), was '--size'"),
        Arguments.of(new String[] {"spark", "--workers", "0"},
            "muster bench spark: --workers must be a positive integer, was '0'"),
        Arguments.of(new String[] {"spark", "--runs", "many"},
            "muster bench spark: --runs must be a positive integer, was 'many'"),
        Arguments.of(new String[] {"spark", "--nodes", "2"},
            "muster bench spark: unknown argument '--nodes'; options: --workers, --runs, --rendezvous"),
        Arguments.of(new String[] {"spark", "--rendezvous", "spark"},
            "muster bench spark: --rendezvous must be one of both, driver, allGather; was 'spark'"));
  }

  @ParameterizedTest(name = "bench {0}")
  @MethodSource("usageErrors")
  void aUsageErrorIsOneLineExitTwoBeforeAnythingRuns(String[] args, String line) {
    Outcome o = run(args);
    assertEquals(2, o.code(), o.err());
    assertEquals(line + "\n", o.err());
    assertEquals("", o.out());
  }

  @ParameterizedTest(name = "bench {0} --help")
  @MethodSource("helps")
  void helpPrintsTheUsageAndExitsZero(String name) {
    Outcome o = name.isEmpty() ? run("--help") : run(name, "--help");
    assertEquals(0, o.code(), o.err());
    assertTrue(o.out().startsWith("usage: muster bench coordination "), o.out());
    assertEquals("", o.err());
  }

  static Stream<String> helps() {
    return Stream.of("", "coordination", "allreduce", "checkpoint", "spark");
  }
}
