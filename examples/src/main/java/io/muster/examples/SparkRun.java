package io.muster.examples;

import io.muster.launch.OnPreemption;
import io.muster.launch.Rerun;
import io.muster.spark.BarrierTrainer;
import io.muster.spark.ExternalCommand;
import java.io.IOException;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.function.Function;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.SparkSession;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * {@code ./muster spark-run} (or this class under {@code spark-submit}): runs a training command on
 * a gang of Spark barrier tasks, each with its {@code TF_CONFIG}, its GPUs and, with
 * {@code --data}, its shard of a CSV or Parquet file as TFRecord {@code tf.train.Example}s; no
 * Java to write. The chief's result file is printed (or written to {@code --result FILE}).
 *
 * <p>Arguments: {@code [--workers 4] [--data FILE] [--out DIR] [--gpus-per-worker 0]
 * [--max-attempts 1] [--rerun cluster-failures] [--preemption-signal TERM] [--preemption-exit-code 42]
 * [--result FILE] -- COMMAND [ARGS...]}.
 */
public final class SparkRun {
  private static final Logger log = LoggerFactory.getLogger(SparkRun.class);

  private SparkRun() {}

  private static final Map<String, String> DEFAULTS = Map.ofEntries(Map.entry("--workers", "4"),
      Map.entry("--ps", "0"), Map.entry("--data", ""), Map.entry("--out", ""), Map.entry("--gpus-per-worker", "0"),
      Map.entry("--max-attempts", "1"), Map.entry("--rerun", "cluster-failures"), Map.entry("--result", ""),
      Map.entry("--preemption-signal", OnPreemption.TENSORFLOW.signal()),
      Map.entry("--preemption-exit-code", Integer.toString(OnPreemption.TENSORFLOW.savedExitCode())));
  private static final Set<String> FLAGS = Set.of("--chief", "--evaluator", "--overwrite");
  private static final String USAGE = "usage: muster spark-run [--workers 4] [--chief] [--ps 0] [--evaluator] "
      + "[--data FILE.csv|FILE.parquet] [--out DIR [--overwrite]] [--gpus-per-worker 0] [--max-attempts 1] "
      + "[--rerun cluster-failures|any-failure] [--preemption-signal TERM] [--preemption-exit-code 42] "
      + "[--result FILE] -- COMMAND [ARGS...]\n"
      + "  --rerun: which failures run the gang again: the cluster's (a signal, a lost task, exit 75), or any "
      + "(a command's own exit code too)\n"
      + "  --out: MUSTER_OUTPUT_DIR of every task (any Hadoop URI); it keeps which run it belongs to (the command and "
      + "the data): the same run again resumes there, another run is refused unless --overwrite, which empties it\n"
      + "  --preemption-signal: sent to every command when an executor is decommissioned or shuts down; a command "
      + "that then exits with --preemption-exit-code saved (TensorFlow's PreemptionCheckpointHandler: TERM, 42), and "
      + "the gang runs again without counting the attempt";

  public static void main(String[] args) {
    int code;
    try (LocalSpark spark = new LocalSpark("muster-spark-run")) {
      code = run(args, System.out, System.err, spark.sessions(trainer -> trainer.gang().size()));
    }
    System.exit(code);
  }

  /**
   * The command: 0 when the gang succeeded (the chief's result printed, or written to
   * {@code --result}), 2 for bad arguments (before any session is asked for), 1 for a failure;
   * each failure is one line on {@code err}.
   */
  static int run(String[] args, PrintStream out, PrintStream err, Function<BarrierTrainer, SparkSession> sessions) {
    if (Args.wantsHelp(args)) {
      out.println(USAGE);
      return 0;
    }
    int dashes = Arrays.asList(args).indexOf("--");
    if (dashes < 0 || dashes == args.length - 1) {
      err.println("muster spark-run: give the command after '--', e.g. muster spark-run --workers 2 -- python3 "
          + "train.py (muster spark-run --help)");
      return 2;
    }
    Map<String, String> options;
    BarrierTrainer trainer;
    try {
      options = Args.parse(Arrays.copyOfRange(args, 0, dashes), DEFAULTS, FLAGS);
      Args.data(options, "--data");
      ClusterPaths.check("--data", options.get("--data"), ClusterPaths.master());
      ClusterPaths.check("--out", options.get("--out"), ClusterPaths.master());
      trainer = trainer(options);
      onPreemption(options);
    } catch (IllegalArgumentException e) {
      err.println("muster spark-run: " + e.getMessage());
      return 2;
    }
    List<String> command = Arrays.asList(args).subList(dashes + 1, args.length);
    try {
      Optional<byte[]> result = run(sessions.apply(trainer), options, command);
      if (!options.get("--result").isEmpty()) {
        Files.write(Path.of(options.get("--result")), result.orElse(new byte[0]));
      } else {
        String where = options.get("--out").isEmpty() ? "" : "; outputs in " + options.get("--out");
        out.println(result.map(r -> "succeeded" + where + "; the chief's result: "
            + new String(r, StandardCharsets.UTF_8))
            .orElse("succeeded" + where + " (the chief left no result in MUSTER_RESULT_FILE)"));
      }
      return 0;
    } catch (Exception e) { // Spark's SparkException is checked, though Scala does not declare it
      log.debug("muster spark-run failed", e);
      err.println("muster spark-run: " + Args.failure(e));
      return 1;
    }
  }

  static BarrierTrainer trainer(Map<String, String> options) {
    boolean chief = Boolean.parseBoolean(options.get("--chief"));
    return BarrierTrainer.builder().chief(chief)
        .numWorkers(chief ? Args.nonNegativeInt(options, "--workers") : Args.positiveInt(options, "--workers"))
        .ps(Args.nonNegativeInt(options, "--ps")).evaluator(Boolean.parseBoolean(options.get("--evaluator")))
        .maxAttempts(Args.positiveInt(options, "--max-attempts"))
        .rerun(Rerun.parse("--rerun", options.get("--rerun")))
        .gpusPerWorker(Args.nonNegativeInt(options, "--gpus-per-worker")).build();
  }

  private static OnPreemption onPreemption(Map<String, String> options) {
    return new OnPreemption(options.get("--preemption-signal"), Args.positiveInt(options, "--preemption-exit-code"));
  }

  static Optional<byte[]> run(SparkSession spark, Map<String, String> options, List<String> command) {
    BarrierTrainer trainer = trainer(options);
    ExternalCommand external = ExternalCommand.of(command).withPreemption(onPreemption(options));
    String data = options.get("--data");
    if (!options.get("--out").isEmpty()) {
      String out = SparkDemo.outputUri(options.get("--out"));
      claim(spark.sparkContext().hadoopConfiguration(), new org.apache.hadoop.fs.Path(out), command, data,
          Boolean.parseBoolean(options.get("--overwrite")));
      external = external.withOutputDir(out);
    }
    if (data.isEmpty()) {
      return trainer.run(spark, external);
    }
    Dataset<Row> rows = DataFiles.read(spark, data);
    long count = rows.count();
    int readers = trainer.gang().trainers();
    if (count < readers) {
      throw new DemoData.InvalidInputException(data + " has " + count + " row" + (count == 1 ? "" : "s")
          + ", fewer than the " + readers + " tasks that each read a shard of it; give more rows or fewer --workers");
    }
    return trainer.run(rows, external);
  }

  /** Makes {@code out} this run's (see {@link CommandRunIdentity}), or refuses it. */
  private static void claim(org.apache.hadoop.conf.Configuration hadoop, org.apache.hadoop.fs.Path out,
      List<String> command, String data, boolean overwrite) {
    try {
      CommandRunIdentity identity = CommandRunIdentity.of(command, data.isEmpty() ? "" : RunIdentity.ofFile(data, hadoop));
      if (identity.claim(out.getFileSystem(hadoop), out, overwrite)) {
        log.info("--out {} holds this run's outputs from before; the command finds them in MUSTER_OUTPUT_DIR", out);
      }
    } catch (IOException e) {
      throw new java.io.UncheckedIOException("--out " + out + ": " + e.getMessage(), e);
    }
  }

  /** The options with their defaults filled in, for callers other than {@link #main}. */
  static Map<String, String> options(String... args) {
    return Args.parse(args, DEFAULTS, FLAGS);
  }
}
