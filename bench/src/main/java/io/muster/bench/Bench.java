package io.muster.bench;

import java.io.PrintStream;
import java.util.Arrays;
import java.util.List;

/** {@code ./muster bench <name>}: benchmark harnesses; results are JSON lines on stdout. */
public final class Bench {
  private Bench() {}

  /** The middle value (the upper of the two middle ones for an even count). */
  static double median(List<Double> values) {
    List<Double> sorted = new java.util.ArrayList<>(values);
    sorted.sort(null);
    return sorted.get(sorted.size() / 2);
  }

  static final String USAGE = String.join("\n",
      "usage: muster bench coordination [--processes 2,4,8] [--threads 2,4,8,16,64] [--seconds 1]",
      "       muster bench coordinator W [ROUNDS]             (ClusterCoordinator: W workers + 1 ps, closures/s)",
      "       muster bench allreduce [--table] [--tls] N SIZE...   (SIZE in bytes, or 4K, 1M, 64M)",
      "       muster bench checkpoint [MiB...]              (default: 64 512)",
      "       muster bench spark [--workers 4] [--runs 5]   (Spark local[N]: gang start, kill and restart)",
      "       muster bench yarn [--containers 4,8] [--runs 3]   (an in-process YARN: submit to running, "
          + "kill to next attempt, master memory)",
      "  results are JSON lines on stdout");

  public static void main(String[] args) throws Exception {
    System.exit(run(args, System.out, System.err));
  }

  /** The command: {@code --help} prints the usage (0); no or an unknown benchmark is a usage error (2). */
  static int run(String[] args, PrintStream out, PrintStream err) throws Exception {
    List<String> rest = args.length == 0 ? List.of() : Arrays.asList(args).subList(1, args.length);
    String name = args.length == 0 ? "" : args[0];
    switch (name) {
      case "coordination" -> CoordinationBench.run(rest);
      case "coordinator" -> CoordinatorBench.run(rest);
      case "allreduce" -> AllReduceBench.run(rest);
      case "checkpoint" -> CheckpointBench.run(rest);
      case "spark" -> SparkBench.run(rest);
      case "--help", "-h" -> out.println(USAGE);
      default -> {
        err.println("muster bench: " + (name.isEmpty() ? "which benchmark?" : "unknown benchmark '" + name + "'")
            + "; the benchmarks: coordination, coordinator, allreduce, checkpoint, spark, yarn (muster bench --help)");
        return 2;
      }
    }
    return 0;
  }
}
