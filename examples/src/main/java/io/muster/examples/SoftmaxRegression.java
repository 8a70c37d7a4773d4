package io.muster.examples;

import io.muster.checkpoint.BackupAndRestore;
import io.muster.checkpoint.CheckpointManager;
import io.muster.checkpoint.Tensor;
import io.muster.checkpoint.WritePolicy;
import io.muster.internal.Json;
import io.muster.strategy.MultiWorkerMirroredStrategy;
import io.muster.strategy.PreemptedException;
import java.nio.ByteBuffer;
import java.security.MessageDigest;
import java.util.HexFormat;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Optional;
import java.util.Random;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Distributed softmax regression on {@link MultiWorkerMirroredStrategy}: run one per worker, each
 * with its own {@code TF_CONFIG} and the job's {@code MUSTER_JOB_TOKEN}.
 *
 * <p>Every worker makes the same synthetic data set, keeps its shard (every N-th row), and trains
 * with local batches of {@code global-batch / N}; gradients are averaged across workers each step,
 * so the update equals one over the global batch. Prints one JSON line: the held-out accuracy and a
 * SHA-256 of the final weights, which must be the same on every worker.
 *
 * <p>Arguments: {@code [--epochs 5] [--global-batch 240] [--learning-rate 0.5] [--seed 7] [--features 20]
 * [--out DIR]}: more features make a wider model, whose all-reduce moves {@code 40 × features} bytes a
 * step. With {@code --out} (any Hadoop file system; every worker must reach it), the chief saves a
 * checkpoint of every epoch to {@code DIR/ckpt} ({@code ckpt-<epoch>}) and every worker backs up
 * to {@code DIR/backup} ({@link BackupAndRestore}), so a run started again after a failure resumes
 * at the epoch that was interrupted and ends with the weights of an uninterrupted run. An epoch's
 * line is logged once its checkpoint and backup are saved.
 */
public final class SoftmaxRegression {

  private static final Logger log = LoggerFactory.getLogger(SoftmaxRegression.class);
  static final int TRAIN_ROWS = 24_000;
  static final int TEST_ROWS = 6_000;
  static final int CLASSES = 10;

  private SoftmaxRegression() {}

  /** The training options and their defaults. */
  static final Map<String, String> DEFAULTS = Map.of("--epochs", "5", "--global-batch", "240", "--learning-rate", "0.5",
      "--seed", "7", "--features", "20", "--out", "");

  /** The training options, each checked; {@code out} is empty where nothing is to be saved. */
  record Settings(int epochs, int globalBatch, float learningRate, long seed, int features, Optional<Path> out) {
    static Settings of(Map<String, String> options) {
      String out = options.get("--out").strip();
      return new Settings(Args.positiveInt(options, "--epochs"), Args.positiveInt(options, "--global-batch"),
          Args.positiveFloat(options, "--learning-rate"), Args.integer(options, "--seed"),
          Args.positiveInt(options, "--features"), out.isEmpty() ? Optional.empty() : Optional.of(new Path(out)));
    }
  }

  /**
   * Trains; a failure (a peer lost, the loss diverged) is one line on stderr and exit 1, its stack
   * trace at debug. With {@code --out}, SIGTERM is a preemption notice: the gang backs up at a step
   * every worker agrees on and each worker exits with {@link PreemptedException#EXIT_CODE}, saying
   * where it saved; the same command run again resumes there.
   */
  public static void main(String[] args) {
    try {
      train(args);
    } catch (PreemptedException e) {
      System.err.println("preempted: " + e.getMessage());
      System.exit(PreemptedException.EXIT_CODE);
    } catch (Exception e) {
      log.debug("training failed", e);
      System.err.println("failed: " + Args.failure(e));
      System.exit(1);
    }
  }

  private static void train(String[] args) throws Exception {
    Settings settings = Settings.of(Args.parse(args, DEFAULTS));
    int epochs = settings.epochs();
    int globalBatch = settings.globalBatch();
    float learningRate = settings.learningRate();
    long seed = settings.seed();
    int features = settings.features();

    MultiWorkerMirroredStrategy.Builder builder = MultiWorkerMirroredStrategy.builder();
    if (settings.out().isPresent()) {
      builder.preemptionSignal("TERM"); // a notice to save at, where there is somewhere to save
    }
    try (MultiWorkerMirroredStrategy strategy = builder.join()) {
      int workers = strategy.numReplicasInSync();
      if (globalBatch % workers != 0) {
        throw new IllegalArgumentException("--global-batch " + globalBatch + " must be a multiple of the number of "
            + "workers (" + workers + ") so that every worker takes an equal local batch");
      }
      SyntheticBlobs all = SyntheticBlobs.generate(seed, TRAIN_ROWS + TEST_ROWS, features, CLASSES);
      SyntheticBlobs train = all.range(0, TRAIN_ROWS).shard(strategy.inputPipelineId(), strategy.numInputPipelines());
      SyntheticBlobs test = all.range(TRAIN_ROWS, TRAIN_ROWS + TEST_ROWS);
      int localBatch = globalBatch / workers;
      int steps = train.rows() / localBatch;

      SoftmaxModel model = new SoftmaxModel(features, CLASSES);
      Random init = new Random(seed * 1000 + strategy.inputPipelineId()); // differs per worker on purpose
      for (int i = 0; i < model.weights.length; i++) {
        model.weights[i] = (float) (init.nextGaussian() * 0.01);
      }
      try (Saves saves = Saves.open(settings.out(), strategy)) {
        Resume start = saves.restore(model, epochs, steps);
        strategy.broadcastFromChief(model.variables());
        for (int epoch = start.epoch(); epoch < epochs; epoch++) {
          int current = epoch;
          SoftmaxModel.Epoch trained = model.trainEpoch(strategy, train,
              new Random(seed + 31L * epoch + strategy.inputPipelineId()), epoch + 1,
              epoch == start.epoch() ? start.step() : 0, steps, localBatch, learningRate,
              step -> saves.onStepEnd(model, current, step));
          saves.onEpochEnd(model, epoch);
          if (strategy.isChief()) {
            log.info("epoch {}: loss {} held-out accuracy {} ({})", epoch + 1, String.format("%.4f", trained.loss()),
                String.format("%.4f", model.accuracy(test)), trained.throughput(workers));
          }
        }
        saves.onTrainEnd();
      }
      Map<String, Object> result = new LinkedHashMap<>();
      result.put("task", strategy.taskId().toString());
      result.put("workers", workers);
      result.put("accuracy", model.accuracy(test));
      result.put("weights_sha256", sha256(model));
      System.out.println(Json.write(result));
      System.out.flush();
    }
  }

  /**
   * The checkpoints and backups of {@code --out}; without it ({@link #NONE}) every step is a no-op.
   * Both managers are there, or neither.
   */
  /** The epoch and step (from 0) training starts at. */
  private record Resume(int epoch, int step) {}

  private record Saves(CheckpointManager checkpoints, BackupAndRestore backup) implements AutoCloseable {
    static final Saves NONE = new Saves(null, null);

    static Saves open(Optional<Path> out, MultiWorkerMirroredStrategy strategy) throws Exception {
      if (out.isEmpty()) {
        return NONE;
      }
      FileSystem fs = out.get().getFileSystem(new Configuration());
      WritePolicy policy = WritePolicy.of(strategy.cluster(), strategy.taskId());
      BackupAndRestore backup = new BackupAndRestore(fs, new Path(out.get(), "backup"), policy,
          BackupAndRestore.EVERY_EPOCH).saveOnPreemption(strategy.preemption());
      try {
        return new Saves(new CheckpointManager(fs, new Path(out.get(), "ckpt"), policy,
            CheckpointManager.Options.DEFAULTS), backup);
      } catch (Exception e) {
        backup.close();
        throw e;
      }
    }

    /**
     * Where to start: the beginning, or just after the backup (an epoch's end, or the step a
     * preempted run saved at); the backup's variables go into {@code model}.
     */
    Resume restore(SoftmaxModel model, int epochs, int steps) throws Exception {
      var resume = this == NONE ? Optional.<BackupAndRestore.ResumePoint>empty()
          : backup.restore(epochs, steps, SoftmaxModel.variablesLike(model.features, model.classes));
      if (resume.isEmpty()) {
        return new Resume(0, 0);
      }
      System.arraycopy(resume.get().variables().get("weights").floats(), 0, model.weights, 0, model.weights.length);
      System.arraycopy(resume.get().variables().get("bias").floats(), 0, model.bias, 0, model.bias.length);
      log.info("resumed from the backup: {} epochs done, and {} steps of the next", resume.get().epoch(),
          resume.get().step());
      return new Resume(resume.get().epoch(), resume.get().step());
    }

    /** After each step: the backup is made here when the gang agreed to save at this step for a preemption. */
    void onStepEnd(SoftmaxModel model, int epoch, int step) throws Exception {
      if (this != NONE) {
        backup.onStepEnd(epoch, step, model::tensors);
      }
    }

    /** Saves epoch {@code epoch}'s checkpoint ({@code ckpt-<epoch + 1>}), then its backup. */
    void onEpochEnd(SoftmaxModel model, int epoch) throws Exception {
      if (this != NONE) {
        Map<String, Tensor> variables = model.tensors();
        checkpoints.save(variables, epoch + 1);
        backup.onEpochEnd(epoch, () -> variables);
      }
    }

    void onTrainEnd() throws Exception {
      if (this != NONE) {
        backup.onTrainEnd();
      }
    }

    @Override
    public void close() {
      if (this != NONE) {
        checkpoints.close();
        backup.close();
      }
    }
  }

  private static String sha256(SoftmaxModel model) throws Exception {
    MessageDigest digest = MessageDigest.getInstance("SHA-256");
    ByteBuffer bytes = ByteBuffer.allocate(4 * (model.weights.length + model.bias.length));
    bytes.asFloatBuffer().put(model.weights).put(model.bias);
    return HexFormat.of().formatHex(digest.digest(bytes.array()));
  }
}
