package io.muster.examples;

import java.io.PrintStream;
import java.util.Arrays;
import java.util.List;
import java.util.Map;

/** {@code ./muster example <name> [args]}. */
public final class Examples {
  static final String USAGE = "usage: muster example softmax [--workers 4] [--epochs 5] [--global-batch 240] "
      + "[--learning-rate 0.5] [--seed 7] [--features 20] [--out DIR [--preempt-after SECONDS]]\n"
      + "  softmax regression on N local worker JVMs, each with its own TF_CONFIG (no Spark); with --out, the\n"
      + "  chief checkpoints every epoch to DIR/ckpt and a run started again resumes from DIR/backup;\n"
      + "  --preempt-after sends the last worker SIGTERM that long after the first epoch: every worker saves\n"
      + "  after one agreed step and exits 42\n"
      + "       muster example EXAMPLE   (a chief, workers and ps tasks, each a local JVM with its own TF_CONFIG)\n"
      + psUsage()
      + "       muster example late-task [--missing]\n"
      + "       muster example train [--steps 600] [--kill-worker-at N] [--learning-rate 0.5] [--batch 32] [--seed 7] "
      + "[--data FILE.csv]";

  private static String psUsage() {
    StringBuilder usage = new StringBuilder();
    PsExamples.DESCRIPTIONS.forEach((name, what) -> usage.append(String.format("  %-17s %s%n", name, what)));
    return usage.toString();
  }

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
    if (PsExamples.DESCRIPTIONS.containsKey(name)) {
      return runPsExample(name, rest, out, err);
    }
    if (!name.equals("softmax")) {
      err.println("muster example: " + (name.isEmpty() ? "which example?" : "unknown example '" + name + "'")
          + "; the examples: softmax, " + String.join(", ", PsExamples.DESCRIPTIONS.keySet())
          + " (muster example --help)");
      return 2;
    }
    LocalTraining.Settings settings;
    try {
      settings = LocalTraining.Settings.parse(rest);
    } catch (IllegalArgumentException e) {
      err.println("muster example softmax: " + e.getMessage());
      return 2;
    }
    return LocalTraining.run(settings.workers(), settings.trainingArgs(), settings.preemptAfter(), out).exitCode();
  }

  private static int runPsExample(String name, String[] args, PrintStream out, PrintStream err) throws Exception {
    LocalPsJob.Late late = null;
    try {
      switch (name) {
        case "late-task" -> {
          Map<String, String> o = Args.parse(args, Map.of(), java.util.Set.of("--missing"));
          late = new LocalPsJob.Late(new io.muster.cluster.TaskId("worker", 1),
              Boolean.parseBoolean(o.get("--missing")) ? null : java.time.Duration.ofSeconds(10));
        }
        case "train" -> {
          Map<String, String> o = Args.parse(args, PsExamples.TRAIN_OPTIONS);
          int steps = Args.positiveInt(o, "--steps");
          Args.positiveInt(o, "--batch");
          Args.integer(o, "--seed");
          Args.positiveFloat(o, "--learning-rate");
          if (Args.nonNegativeInt(o, "--kill-worker-at") >= steps) {
            throw new IllegalArgumentException("--kill-worker-at must be below --steps (" + steps + "), was "
                + o.get("--kill-worker-at"));
          }
          if (!o.get("--data").isEmpty()) {
            // a bad or too small file is refused before any task starts
            PsExamples.requireEnoughRows(PsExamples.dataset(o.get("--data"), Args.integer(o, "--seed")), o.get("--data"),
                PsExamples.shape(name)[0]);
          }
        }
        default -> Args.parse(args, Map.of());
      }
    } catch (IllegalArgumentException e) {
      err.println("muster example " + name + ": " + e.getMessage());
      return 2;
    }
    int[] shape = PsExamples.shape(name);
    return LocalPsJob.run(name, shape[0], shape[1], List.of(args), late, out);
  }
}
