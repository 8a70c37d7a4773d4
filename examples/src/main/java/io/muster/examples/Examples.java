package io.muster.examples;

import java.io.PrintStream;
import java.util.Arrays;

/** {@code ./muster example <name> [args]}. */
public final class Examples {
  static final String USAGE = "usage: muster example softmax [--workers 4] [--epochs 5] [--global-batch 240] "
      + "[--learning-rate 0.5] [--seed 7]\n"
      + "  softmax regression on N local worker JVMs, each with its own TF_CONFIG (no Spark)";

  private Examples() {}

  public static void main(String[] args) throws Exception {
    System.exit(run(args, System.out, System.err));
  }

  /** The command: 0 trained, 2 bad arguments (before any worker starts), else the workers' exit code. */
  static int run(String[] args, PrintStream out, PrintStream err) throws Exception {
    String name = args.length == 0 ? "" : args[0];
    String[] rest = args.length == 0 ? args : Arrays.copyOfRange(args, 1, args.length);
    if (name.equals("--help") || name.equals("-h") || Args.wantsHelp(rest)) {
      out.println(USAGE);
      return 0;
    }
    if (!name.equals("softmax")) {
      err.println("muster example: " + (name.isEmpty() ? "which example?" : "unknown example '" + name + "'")
          + "; the examples: softmax (muster example --help)");
      return 2;
    }
    LocalTraining.Settings settings;
    try {
      settings = LocalTraining.Settings.parse(rest);
    } catch (IllegalArgumentException e) {
      err.println("muster example softmax: " + e.getMessage());
      return 2;
    }
    return LocalTraining.run(settings.workers(), settings.trainingArgs(), out).exitCode();
  }
}
