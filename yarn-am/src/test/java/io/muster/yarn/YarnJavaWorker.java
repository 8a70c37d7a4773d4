package io.muster.yarn;

import io.muster.checkpoint.BackupAndRestore;
import io.muster.checkpoint.CheckpointManager;
import io.muster.checkpoint.Tensor;
import io.muster.checkpoint.WritePolicy;
import io.muster.launch.Rerun;
import io.muster.strategy.MultiWorkerMirroredStrategy;
import io.muster.strategy.PreemptedException;
import java.nio.ByteBuffer;
import java.security.MessageDigest;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.Random;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;

/**
 * Muster's own Java runtime as a YARN task's command: {@link MultiWorkerMirroredStrategy} from the
 * {@code TF_CONFIG} and {@code MUSTER_JOB_TOKEN} the executor gives it, a linear model trained on
 * this worker's shard of synthetic data with averaged gradients, a checkpoint every epoch in
 * {@code MUSTER_OUTPUT_DIR} (the chief's; the others' in {@code workertemp_<i>}, deleted), a backup
 * every epoch that a re-run gang resumes from, and a digest of the final weights on stdout, which
 * must be the same on every task. With an argument {@code K}, worker 1 exits with code 75 (asking
 * for a re-run) in epoch K of attempt 0. With {@code preemptible MILLIS}, each step takes at least
 * MILLIS and SIGTERM is a preemption notice: the gang backs up at a step it agrees on and exits
 * with 42, and the next attempt resumes at that step.
 */
public final class YarnJavaWorker {
  private YarnJavaWorker() {}

  public static void main(String[] args) throws Exception {
    int features = 8;
    int epochs = 4;
    boolean preemptible = args.length > 0 && args[0].equals("preemptible");
    long stepMillis = preemptible ? Long.parseLong(args[1]) : 0;
    int crashInEpoch = args.length > 0 && !preemptible ? Integer.parseInt(args[0]) : -1;
    int attempt = Integer.parseInt(System.getenv("MUSTER_ATTEMPT"));
    MultiWorkerMirroredStrategy.Builder builder = MultiWorkerMirroredStrategy.builder();
    if (preemptible) {
      builder.preemptionSignal("TERM");
    }
    try (MultiWorkerMirroredStrategy strategy = builder.join()) {
      Path out = new Path(System.getenv("MUSTER_OUTPUT_DIR"));
      FileSystem fs = out.getFileSystem(new Configuration());
      WritePolicy policy = WritePolicy.of(strategy.cluster(), strategy.taskId());
      float[] weights = new float[features];
      try (BackupAndRestore backup = new BackupAndRestore(fs, new Path(out, "backup"), policy,
              BackupAndRestore.EVERY_EPOCH);
          CheckpointManager checkpoints = new CheckpointManager(fs, out, policy, CheckpointManager.Options.DEFAULTS)) {
        Map<String, Tensor> like = Map.of("weights", Tensor.ofFloats(new long[] {features}, new float[features]),
            "epoch", Tensor.scalar(0));
        if (preemptible) {
          backup.saveOnPreemption(strategy.preemption());
        }
        int[] start = backup.restore(epochs, 20, like).map(point -> {
          System.arraycopy(point.variables().get("weights").floats(), 0, weights, 0, features);
          return new int[] {point.epoch(), point.step()};
        }).orElse(new int[] {0, 0});
        int first = start[0];
        System.out.println("attempt " + attempt + " starts at epoch " + first + (start[1] == 0 ? "" : " step " + start[1]));
        for (int epoch = first; epoch < epochs; epoch++) {
          if (attempt == 0 && epoch == crashInEpoch && strategy.taskId().toString().equals("worker 1")) {
            System.err.println("worker 1 crashes in epoch " + epoch + ", as asked");
            System.exit(Rerun.EX_TEMPFAIL);
          }
          Random data = new Random(1000L * epoch + strategy.inputPipelineId()); // this worker's shard of the epoch
          for (int step = 0; step < 20; step++) {
            boolean done = epoch == first && step < start[1]; // before the preempted run's save: only its data is drawn
            float[] gradient = new float[features];
            for (int row = 0; row < 16; row++) {
              float[] x = new float[features];
              float target = 0;
              float prediction = 0;
              for (int f = 0; f < features; f++) {
                x[f] = (float) data.nextGaussian();
                target += (f + 1) * x[f];
                prediction += weights[f] * x[f];
              }
              for (int f = 0; f < features; f++) {
                gradient[f] += (prediction - target) * x[f] / 16;
              }
            }
            if (done) {
              continue;
            }
            strategy.allReduce(List.of(gradient)); // MEAN over the workers
            for (int f = 0; f < features; f++) {
              weights[f] -= 0.05f * gradient[f];
            }
            Thread.sleep(stepMillis);
            int current = epoch;
            try {
              backup.onStepEnd(epoch, step, () -> Map.of("weights", Tensor.ofFloats(new long[] {features},
                  weights.clone()), "epoch", Tensor.scalar(current)));
            } catch (PreemptedException e) {
              System.err.println("preempted: " + e.getMessage());
              System.exit(PreemptedException.EXIT_CODE);
            }
          }
          Map<String, Tensor> variables = Map.of("weights", Tensor.ofFloats(new long[] {features}, weights.clone()),
              "epoch", Tensor.scalar(epoch + 1));
          checkpoints.save(variables);
          backup.onEpochEnd(epoch, () -> variables);
        }
        backup.onTrainEnd();
      }
      ByteBuffer bytes = ByteBuffer.allocate(4 * features);
      bytes.asFloatBuffer().put(weights);
      System.out.println("weights-sha256 " + HexFormat.of().formatHex(MessageDigest.getInstance("SHA-256")
          .digest(bytes.array())));
    }
  }
}
