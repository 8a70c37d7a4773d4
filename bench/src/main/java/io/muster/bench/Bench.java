package io.muster.bench;

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

  public static void main(String[] args) throws Exception {
    List<String> rest = args.length == 0 ? List.of() : Arrays.asList(args).subList(1, args.length);
    String name = args.length == 0 ? "" : args[0];
    switch (name) {
      case "coordination" -> CoordinationBench.run(rest);
      case "allreduce" -> AllReduceBench.run(rest);
      case "checkpoint" -> CheckpointBench.run(rest);
      case "spark" -> SparkBench.run(rest);
      default -> {
        System.err.println("usage: muster bench coordination [--processes 2,4,8] [--threads 2,4,8,16,64] [--seconds 1]\n"
            + "       muster bench allreduce [--table] [--tls] N SIZE...   (SIZE in bytes, or 4K, 1M, 64M)\n"
            + "       muster bench checkpoint [MiB...]              (default: 64 512)\n"
            + "       muster bench spark [--workers 4] [--runs 5]   (Spark local[N]: gang start, kill and restart)\n"
            + "       muster bench yarn [--containers 4,8] [--runs 3]   (an in-process YARN: submit to running, "
            + "kill to next attempt, master memory)");
        System.exit(2);
      }
    }
  }
}
