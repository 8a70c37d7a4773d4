package io.muster.examples;

import io.muster.checkpoint.BackupAndRestore;
import io.muster.checkpoint.CheckpointManager;
import io.muster.checkpoint.Tensor;
import io.muster.collective.ReduceOp;
import io.muster.spark.BarrierTrainer;
import io.muster.spark.RetryableException;
import io.muster.spark.TrainContext;
import io.muster.strategy.MultiWorkerMirroredStrategy;
import io.muster.summary.SummaryWriter;
import java.io.IOException;
import java.io.PrintStream;
import java.io.Serializable;
import java.io.UncheckedIOException;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Random;
import java.util.function.Function;
import org.apache.hadoop.fs.Path;
import org.apache.spark.sql.Column;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.functions;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The main job ({@code ./muster demo}, or the same class under {@code spark-submit}): softmax
 * regression on a DataFrame with a {@code label} column, trained by {@code --workers} Spark barrier
 * tasks with MultiWorkerMirroredStrategy. Features are standardised with the training split's
 * mean and deviation; 20% of the rows are held out. The chief writes checkpoints to
 * {@code <out>/ckpt} and TensorBoard scalars to {@code <out>/logs/train}; a backup under
 * {@code <out>/backup} lets a re-run gang resume.
 *
 * <p>Arguments: {@code [--data FILE.csv|FILE.parquet] [--out ./muster-out] [--workers 4]
 * [--epochs 10] [--global-batch 64] [--learning-rate 0.2] [--seed 7] [--crash-once-at-epoch K]
 * [--overwrite] [--drop-nulls]}; without {@code --data} the rows are generated, and a data file is checked
 * first (see {@link DemoData}; {@code --drop-nulls} skips rows with an empty cell instead of refusing them). {@code --crash-once-at-epoch K}
 * makes worker 1 throw during epoch K of the first run, to watch the gang re-run and resume from
 * the backup. An {@code --out} holding another run's outputs is refused unless {@code --overwrite}
 * (see {@link RunIdentity}); the same run resumes from its backup.
 */
public final class SparkDemo {

  private static final Logger log = LoggerFactory.getLogger(SparkDemo.class);
  static final String USAGE = String.join("\n",
      "usage: muster demo [--data FILE.csv|FILE.parquet] [--out muster-out] [--workers 4] [--epochs 10]",
      "                   [--global-batch 64] [--learning-rate 0.2] [--seed 7] [--crash-once-at-epoch K] [--overwrite]",
      "                   [--drop-nulls]",
      "  softmax regression on Spark local[N] (or spark-submit) with N barrier tasks; without --data the rows are",
      "  generated; --data needs a 'label' column of integer classes 0, 1, ..., every other column numeric, no",
      "  empty cells (--drop-nulls skips such rows); --out may be any Hadoop URI; --overwrite replaces another",
      "  run's outputs in --out (the same run resumes from its backup); bad data: one line naming the file, row",
      "  and column, exit 1, before training starts");
  private static final int GENERATED_ROWS = 4000;
  private static final int GENERATED_FEATURES = 20;
  private static final int GENERATED_CLASSES = 10;

  /** The trained model and where the outputs are. */
  public record Result(double accuracy, long heldOutRows, int classes, long droppedRows, String checkpoint,
      String logs, int attempts, int resumedAtEpoch, int resumedAtStep) {}

  /** What the chief hands back: the final weights, and which run of the gang trained from which epoch and step. */
  record Weights(float[] weights, float[] bias, int attempt, int resumedAtEpoch, int resumedAtStep)
      implements Serializable {}

  private SparkDemo() {}

  /** The job's settings, from {@code --name value} arguments. */
  public record Options(String data, String out, int workers, int epochs, int globalBatch, float learningRate,
      long seed, int crashOnceAtEpoch, boolean overwrite, boolean dropNulls) implements Serializable {

    public static Options parse(String... args) {
      Map<String, String> o = Args.parse(args, Map.of("--data", "", "--out", "muster-out", "--workers", "4",
          "--epochs", "10", "--global-batch", "64", "--learning-rate", "0.2", "--seed", "7",
          "--crash-once-at-epoch", "0"), java.util.Set.of("--overwrite", "--drop-nulls"));
      int epochs = Args.positiveInt(o, "--epochs");
      int crash = o.get("--crash-once-at-epoch").equals("0") ? 0 : Args.positiveInt(o, "--crash-once-at-epoch");
      if (crash > epochs) {
        throw new IllegalArgumentException("--crash-once-at-epoch must be between 1 and --epochs " + epochs
            + " (0: no crash), was " + crash);
      }
      int workers = Args.positiveInt(o, "--workers");
      int globalBatch = Args.positiveInt(o, "--global-batch");
      if (globalBatch % workers != 0) {
        throw new IllegalArgumentException("--global-batch " + globalBatch + " must be a multiple of --workers "
            + workers);
      }
      return new Options(Args.data(o, "--data"), o.get("--out"), workers, epochs, globalBatch,
          Args.positiveFloat(o, "--learning-rate"), Args.integer(o, "--seed"), crash,
          Boolean.parseBoolean(o.get("--overwrite")), Boolean.parseBoolean(o.get("--drop-nulls")));
    }
  }

  public static void main(String[] args) {
    int code;
    try (LocalSpark spark = new LocalSpark("muster-demo")) {
      code = run(args, System.out, System.err, spark.sessions(Options::workers));
    }
    System.exit(code);
  }

  /**
   * The command: parses the arguments, trains on the session {@code sessions} gives, prints the
   * result on {@code out}. Returns the exit code: 0 trained, 2 bad arguments (before any session
   * is asked for), 1 anything else; each failure is one line on {@code err}.
   */
  static int run(String[] args, PrintStream out, PrintStream err, Function<Options, SparkSession> sessions) {
    if (Args.wantsHelp(args)) {
      out.println(USAGE);
      return 0;
    }
    Options options;
    try {
      options = Options.parse(args);
      ClusterPaths.check("--data", options.data(), ClusterPaths.master());
      ClusterPaths.check("--out", options.out(), ClusterPaths.master());
    } catch (IllegalArgumentException e) {
      err.println("muster demo: " + e.getMessage());
      return 2;
    }
    try {
      Result r = run(sessions.apply(options), options);
      if (r.attempts() > 1) {
        out.printf("the gang ran %d times; the last run resumed from the backup at epoch %d%s%n", r.attempts(),
            r.resumedAtEpoch() + 1, r.resumedAtStep() == 0 ? "" : ", step " + (r.resumedAtStep() + 1));
      }
      if (r.droppedRows() > 0) {
        out.printf("skipped %d row%s with an empty cell (--drop-nulls)%n", r.droppedRows(),
            r.droppedRows() == 1 ? "" : "s");
      }
      out.printf("held-out accuracy %.4f on %d rows of %d classes; checkpoints in %s, TensorBoard logs in %s%n",
          r.accuracy(), r.heldOutRows(), r.classes(), r.checkpoint(), r.logs());
      return 0;
    } catch (Exception e) { // Spark's SparkException is checked, though Scala does not declare it
      log.debug("muster demo failed", e);
      err.println("muster demo: " + Args.failure(e));
      return 1;
    }
  }

  /** An absolute URI: a Hadoop URI as given, a local path made absolute ({@code file:///…}, no trailing slash). */
  static String outputUri(String out) {
    if (out.matches("[a-zA-Z][a-zA-Z0-9+.-]*:.*")) {
      return out;
    }
    String uri = java.nio.file.Path.of(out).toAbsolutePath().normalize().toUri().toString();
    return uri.endsWith("/") && !uri.equals("file:///") ? uri.substring(0, uri.length() - 1) : uri;
  }

  public static Result run(SparkSession spark, Options options) {
    String data = options.data();
    int workers = options.workers();
    int globalBatch = options.globalBatch();
    long seed = options.seed();
    Path outDir = new Path(outputUri(options.out()));
    DemoData.checkWritable(spark.sparkContext().hadoopConfiguration(), outDir);
    Dataset<Row> df = data.isEmpty() ? generated(spark, seed) : DataFiles.read(spark, data);
    long dropped = 0;
    if (!data.isEmpty() && options.dropNulls()) {
      long rows = df.count();
      df = df.na().drop();
      dropped = rows - df.count();
    }
    int classes = data.isEmpty() ? GENERATED_CLASSES : DemoData.check(df, data);
    if (!data.isEmpty()) {
      df = DemoData.numeric(df);
    }
    String[] features = Arrays.stream(df.columns()).filter(c -> !c.equals("label")).toArray(String[]::new);
    // Held out: one row in five, chosen by a hash of the row's values and the seed, so the split is
    // the same however the data is partitioned (randomSplit's depends on the partitioning).
    Column row = functions.struct(Arrays.stream(df.columns()).map(functions::col).toArray(Column[]::new));
    Column heldOut = functions.pmod(functions.hash(functions.lit(seed), row), functions.lit(5)).equalTo(0);
    Dataset<Row> train = df.filter(functions.not(heldOut));
    Dataset<Row> heldOutRows = df.filter(heldOut);
    float[] mean = new float[features.length];
    float[] scale = new float[features.length];
    List<Column> stats = new ArrayList<>();
    for (String f : features) {
      stats.add(functions.avg(f));
      stats.add(functions.stddev_pop(f));
    }
    Row moments = train.agg(stats.get(0), stats.subList(1, stats.size()).toArray(Column[]::new)).first();
    for (int i = 0; i < features.length; i++) {
      mean[i] = (float) moments.getDouble(2 * i);
      double sd = moments.isNullAt(2 * i + 1) ? 0 : moments.getDouble(2 * i + 1);
      scale[i] = sd > 1e-9 ? (float) (1 / sd) : 0f;
    }
    String[] ordered = Arrays.copyOf(features, features.length + 1);
    ordered[features.length] = "label"; // rows reach the tasks as features..., label
    SyntheticBlobs test = toArrays(heldOutRows.select(column(ordered)).collectAsList(), features.length, mean, scale,
        classes);
    long trainRows = train.count();
    if (trainRows < globalBatch) {
      throw new DemoData.InvalidInputException((data.isEmpty() ? "the generated data" : data) + " has " + trainRows
          + " training rows (after holding out 1 in 5), fewer than --global-batch " + globalBatch
          + ": each of the " + workers + " workers needs a full batch of " + globalBatch / workers
          + "; give more rows or a smaller --global-batch");
    }
    try {
      RunIdentity identity = new RunIdentity(data.isEmpty() ? "generated (" + GENERATED_ROWS + " rows of "
          + GENERATED_FEATURES + " features and " + GENERATED_CLASSES + " classes)"
          : RunIdentity.ofFile(data, spark.sparkContext().hadoopConfiguration()),
          Arrays.asList(features), classes, seed);
      identity.claim(outDir.getFileSystem(spark.sparkContext().hadoopConfiguration()), outDir, options.overwrite(),
          options.epochs(), SoftmaxModel.variablesLike(features.length, classes));
    } catch (IOException e) {
      throw new UncheckedIOException(e.getMessage(), e);
    }

    Weights weights = BarrierTrainer.builder().numWorkers(workers).maxAttempts(2).build().fit(
        train.select(column(ordered)), ctx -> train(ctx, features.length, classes, mean, scale, test, outDir, options));
    SoftmaxModel model = new SoftmaxModel(features.length, classes);
    System.arraycopy(weights.weights(), 0, model.weights, 0, model.weights.length);
    System.arraycopy(weights.bias(), 0, model.bias, 0, model.bias.length);
    return new Result(model.accuracy(test), test.rows(), classes, dropped, new Path(outDir, "ckpt").toString(),
        new Path(outDir, "logs").toString(), weights.attempt() + 1,
        weights.resumedAtEpoch(), weights.resumedAtStep());
  }

  private static Column[] column(String[] names) {
    return Arrays.stream(names).map(functions::col).toArray(Column[]::new);
  }

  private static Weights train(TrainContext<Row> ctx, int features, int classes, float[] mean, float[] scale,
      SyntheticBlobs test, Path out, Options options) throws Exception {
    int epochs = options.epochs();
    int globalBatch = options.globalBatch();
    MultiWorkerMirroredStrategy strategy = ctx.strategy();
    List<Row> rows = new ArrayList<>();
    ctx.rows().forEachRemaining(rows::add);
    SyntheticBlobs shard = toArrays(rows, features, mean, scale, classes);
    int localBatch = globalBatch / strategy.numReplicasInSync();
    long[] fewest = {shard.rows()};
    strategy.collectives().allReduce(fewest, ReduceOp.MIN); // every replica takes as many steps
    int steps = (int) (fewest[0] / localBatch);
    if (steps == 0) {
      throw new IllegalStateException("a worker has only " + fewest[0] + " rows, fewer than its local batch of "
          + localBatch + "; use fewer workers or a smaller --global-batch");
    }

    SoftmaxModel model = new SoftmaxModel(features, classes);
    // Preemption-safe: on a notice (YARN's, an executor decommissioned), the gang saves after a step it agrees on.
    try (BackupAndRestore backup = ctx.backupAndRestore(new Path(out, "backup"), BackupAndRestore.EVERY_EPOCH)
            .saveOnPreemption(strategy.preemption());
        CheckpointManager checkpoints = ctx.checkpointManager(new Path(out, "ckpt"),
            CheckpointManager.Options.DEFAULTS);
        SummaryWriter summaries = ctx.summaryWriter(new Path(new Path(out, "logs"), "train"))) {
      var resume = backup.restore(epochs, steps, SoftmaxModel.variablesLike(features, classes));
      int firstEpoch = 0;
      int firstStep = 0;
      if (resume.isPresent()) {
        firstEpoch = resume.get().epoch();
        firstStep = resume.get().step();
        System.arraycopy(resume.get().variables().get("weights").floats(), 0, model.weights, 0, model.weights.length);
        System.arraycopy(resume.get().variables().get("bias").floats(), 0, model.bias, 0, model.bias.length);
      }
      strategy.broadcastFromChief(model.variables());
      for (int epoch = firstEpoch; epoch < epochs; epoch++) {
        if (ctx.attempt() == 0 && epoch + 1 == options.crashOnceAtEpoch()) {
          // Everyone meets first, so the crash comes after the previous epoch's backup is complete.
          strategy.barrier("crash-once-at-epoch");
          if (ctx.task().index() == 1 % strategy.numReplicasInSync()) {
            // Retryable: the driver re-runs the gang for it, as it would for a lost executor.
            throw new RetryableException("--crash-once-at-epoch " + options.crashOnceAtEpoch() + ": "
                + ctx.task() + " crashes in epoch " + (epoch + 1) + " of the first run, as asked");
          }
        }
        int current = epoch;
        SoftmaxModel.Epoch trained = model.trainEpoch(strategy, shard,
            new Random(options.seed() + 31L * epoch + strategy.inputPipelineId()), epoch + 1,
            epoch == firstEpoch ? firstStep : 0, steps, localBatch, options.learningRate(),
            step -> backup.onStepEnd(current, step, model::tensors));
        double accuracy = model.accuracy(test);
        Map<String, Tensor> variables = model.tensors();
        Map<String, Tensor> checkpoint = new java.util.HashMap<>(variables);
        checkpoint.put("epoch", Tensor.scalar(epoch + 1));
        // The epoch counts as done once its backup is made: its summaries are on disk before, and
        // its checkpoint is numbered by the epoch, so a gang that re-runs it writes the same ckpt-N.
        summaries.scalar("epoch_loss", trained.loss(), epoch + 1);
        summaries.scalar("epoch_accuracy", accuracy, epoch + 1);
        summaries.flush();
        checkpoints.save(checkpoint, epoch + 1);
        backup.onEpochEnd(epoch, () -> variables);
        if (strategy.isChief()) {
          ctx.progress(String.format(Locale.ROOT, "epoch %d/%d: loss %.4f held-out accuracy %.4f (%s)", epoch + 1,
              epochs, trained.loss(), accuracy, trained.throughput(strategy.numReplicasInSync())));
        }
      }
      backup.onTrainEnd();
      return new Weights(model.weights, model.bias, ctx.attempt(), firstEpoch, firstStep);
    }
  }

  private static SyntheticBlobs toArrays(List<Row> rows, int features, float[] mean, float[] scale, int classes) {
    float[][] x = new float[rows.size()][features];
    int[] y = new int[rows.size()];
    for (int i = 0; i < rows.size(); i++) {
      Row r = rows.get(i);
      for (int f = 0; f < features; f++) {
        x[i][f] = (((Number) r.get(f)).floatValue() - mean[f]) * scale[f];
      }
      y[i] = ((Number) r.get(features)).intValue();
    }
    return new SyntheticBlobs(x, y, features, classes);
  }

  /** 4000 rows of 10 overlapping Gaussian blobs in 20 dimensions. */
  private static Dataset<Row> generated(SparkSession spark, long seed) {
    SyntheticBlobs blobs = SyntheticBlobs.generate(seed, GENERATED_ROWS, GENERATED_FEATURES, GENERATED_CLASSES);
    List<StructField> fields = new ArrayList<>();
    for (int f = 0; f < GENERATED_FEATURES; f++) {
      fields.add(DataTypes.createStructField("f" + f, DataTypes.FloatType, false));
    }
    fields.add(DataTypes.createStructField("label", DataTypes.IntegerType, false));
    List<Row> rows = new ArrayList<>();
    for (int i = 0; i < blobs.rows(); i++) {
      Object[] values = new Object[GENERATED_FEATURES + 1];
      for (int f = 0; f < GENERATED_FEATURES; f++) {
        values[f] = blobs.x()[i][f];
      }
      values[GENERATED_FEATURES] = blobs.y()[i];
      rows.add(RowFactory.create(values));
    }
    return spark.createDataFrame(rows, new StructType(fields.toArray(StructField[]::new)));
  }

}
