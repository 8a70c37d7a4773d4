package io.muster.yarn;

import io.muster.checkpoint.CheckpointManager;
import io.muster.checkpoint.Tensor;
import io.muster.checkpoint.WritePolicy;
import io.muster.strategy.MultiWorkerMirroredStrategy;
import java.nio.ByteBuffer;
import java.security.MessageDigest;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.Random;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.Path;

/**
 * Muster's own Java runtime as a YARN task's command: {@link MultiWorkerMirroredStrategy} from the
 * {@code TF_CONFIG} and {@code MUSTER_JOB_TOKEN} the executor gives it, a linear model trained on
 * this worker's shard of synthetic data with averaged gradients, a checkpoint every epoch in
 * {@code MUSTER_OUTPUT_DIR} (the chief's; the others' in {@code workertemp_<i>}, deleted), and a
 * digest of the final weights on stdout, which must be the same on every task.
 */
public final class YarnJavaWorker {
  private YarnJavaWorker() {}

  public static void main(String[] args) throws Exception {
    int features = 8;
    try (MultiWorkerMirroredStrategy strategy = MultiWorkerMirroredStrategy.builder().build()) {
      Path out = new Path(System.getenv("MUSTER_OUTPUT_DIR"));
      WritePolicy policy = WritePolicy.of(strategy.cluster(), strategy.taskId());
      float[] weights = new float[features];
      Random data = new Random(100 + strategy.inputPipelineId()); // each worker's own shard
      try (CheckpointManager checkpoints = new CheckpointManager(out.getFileSystem(new Configuration()), out, policy,
          CheckpointManager.Options.DEFAULTS)) {
        for (int epoch = 0; epoch < 3; epoch++) {
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
          checkpoints.save(Map.of("weights", Tensor.ofFloats(new long[] {features}, weights.clone()),
              "epoch", Tensor.scalar(epoch + 1)));
        }
      }
      ByteBuffer bytes = ByteBuffer.allocate(4 * features);
      bytes.asFloatBuffer().put(weights);
      System.out.println("weights-sha256 " + HexFormat.of().formatHex(MessageDigest.getInstance("SHA-256")
          .digest(bytes.array())));
    }
  }
}
