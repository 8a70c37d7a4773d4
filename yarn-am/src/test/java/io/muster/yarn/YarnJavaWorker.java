package io.muster.yarn;

import io.muster.checkpoint.BackupAndRestore;
import io.muster.checkpoint.CheckpointManager;
import io.muster.checkpoint.Tensor;
import io.muster.checkpoint.WritePolicy;
import io.muster.launch.Rerun;
import io.muster.strategy.MultiWorkerMirroredStrategy;
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
 * for a re-run) in epoch K of attempt 0.
 */
public final class YarnJavaWorker {
  private YarnJavaWorker() {}

  public static void main(String[] args) throws Exception {
    int features = 8;
    int epochs = 4;
    int crashInEpoch = args.length > 0 ? Integer.parseInt(args[0]) : -1;
    int attempt = Integer.parseInt(System.getenv("MUSTER_ATTEMPT"));
    try (MultiWorkerMirroredStrategy strategy = MultiWorkerMirroredStrategy.builder().build()) {
      Path out = new Path(System.getenv("MUSTER_OUTPUT_DIR"));
      FileSystem fs = out.getFileSystem(new Configuration());
      WritePolicy policy = WritePolicy.of(strategy.cluster(), strategy.taskId());
      float[] weights = new float[features];
      try (BackupAndRestore backup = new BackupAndRestore(fs, new Path(out, "backup"), policy,
              BackupAndRestore.EVERY_EPOCH);
          CheckpointManager checkpoints = new CheckpointManager(fs, out, policy, CheckpointManager.Options.DEFAULTS)) {
        Map<String, Tensor> like = Map.of("weights", Tensor.ofFloats(new long[] {features}, new float[features]),
            "epoch", Tensor.scalar(0));
        int first = backup.restore(epochs, 20, like).map(point -> {
          System.arraycopy(point.variables().get("weights").floats(), 0, weights, 0, features);
          return point.epoch();
        }).orElse(0);
        System.out.println("attempt " + attempt + " starts at epoch " + first);
        for (int epoch = first; epoch < epochs; epoch++) {
          if (attempt == 0 && epoch == crashInEpoch && strategy.taskId().toString().equals("worker 1")) {
            System.err.println("worker 1 crashes in epoch " + epoch + ", as asked");
            System.exit(Rerun.EX_TEMPFAIL);
          }
          Random data = new Random(1000L * epoch + strategy.inputPipelineId()); // this worker's shard of the epoch
          for (int step = 0; step < 20; step++) {
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
            strategy.allReduce(List.of(gradient)); // MEAN over the workers
            for (int f = 0; f < features; f++) {
              weights[f] -= 0.05f * gradient[f];
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
