package io.muster.bench;

import java.io.PrintStream;
import java.util.Arrays;
import java.util.List;

/** {@code ./muster bench <name>}: benchmark harnesses; results are JSON lines on stdout. */
public final class Bench {
  private static final org.slf4j.Logger log = org.slf4j.LoggerFactory.getLogger(Bench.class);
  private Bench() {}

  /** The middle value (the upper of the two middle ones for an even count). */
  static double median(List<Double> values) {
    List<Double> sorted = new java.util.ArrayList<>(values);
    sorted.sort(null);
    return sorted.get(sorted.size() / 2);
  }

  static final String USAGE = String.join("\n",
      "usage: muster bench coordination [--processes 2,4,8] [--threads 2,4,8,16,64] [--seconds 1]",
      "       muster bench coordinator W [ROUNDS]             (ClusterCoordinator: W workers + 1 ps, closures/s; ROUNDS default 5, the first warm up)",
      "       muster bench allreduce [--table] [--tls] N SIZE...   (SIZE in bytes, or 4K, 1M, 64M)",
      "       muster bench allreduce --first-steps [--warm-up none,loopback[:OPS] | both] N SIZE...   (a fresh gang "
          + "per SIZE and warm-up: its first 100 all-reduces against 100 once the JIT has settled)",
      "       muster bench checkpoint [MiB...]              (default: 64 512)",
      "       muster bench spark [--workers 4] [--runs 5] [--rendezvous both]   (Spark local[N]: gang start, kill and "
          + "restart; the tasks meeting through the driver, Spark's allGather, or both in turn)",
      "       muster bench yarn [--containers 4,8] [--runs 3] [--executors both] [--restart both]   (an in-process "
          + "YARN: submit to running, kill to next attempt, master memory)",
      "  results are JSON lines on stdout");

  /** A benchmark whose options are checked: what is left is to run it. */
  interface Job {
    void run() throws Exception;
  }

  public static void main(String[] args) {
    System.exit(run(args, System.out, System.err));
  }

  /**
   * The command: {@code --help} (alone or after a benchmark's name) prints the usage (0); no or an
   * unknown benchmark, or a benchmark's own bad option, is a usage error: one line, exit 2, before
   * anything is measured.
   */
  static int run(String[] args, PrintStream out, PrintStream err) {
    List<String> rest = args.length == 0 ? List.of() : Arrays.asList(args).subList(1, args.length);
    String name = args.length == 0 ? "" : args[0];
    if (name.equals("--help") || name.equals("-h") || rest.contains("--help")) {
      out.println(USAGE);
      return 0;
    }
    Job job;
    try {
      job = switch (name) {
        case "coordination" -> CoordinationBench.parse(rest);
        case "coordinator" -> CoordinatorBench.parse(rest);
        case "allreduce" -> AllReduceBench.parse(rest);
        case "checkpoint" -> CheckpointBench.parse(rest);
        case "spark" -> SparkBench.parse(rest);
        default -> {
          err.println("muster bench: " + (name.isEmpty() ? "which benchmark?" : "unknown benchmark '" + name + "'")
              + "; the benchmarks: coordination, coordinator, allreduce, checkpoint, spark, yarn (muster bench --help)");
          yield null;
        }
      };
    } catch (IllegalArgumentException e) {
      err.println("muster bench " + name + ": " + e.getMessage());
      return 2;
    }
    if (job == null) {
      return 2;
    }
    try {
      job.run();
      return 0;
    } catch (Exception e) {
      log.debug("muster bench {} failed", name, e);
      err.println("muster bench " + name + ": " + java.util.Objects.requireNonNullElse(e.getMessage(), e.toString())
          + " (MUSTER_LOG_LEVEL=debug for the stack trace)");
      return 1;
    }
  }

  /** {@code value} as a positive integer; else {@code message}, which says what it must be. */
  static int positive(String value, String message) {
    try {
      int n = Integer.parseInt(value.strip());
      if (n > 0) {
        return n;
      }
    } catch (NumberFormatException e) {
      // the message says what is accepted
    }
    throw new IllegalArgumentException(message);
  }
}
