package io.muster.checkpoint;

import java.util.Map;
import java.util.Optional;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.Path;

/**
 * A child JVM "training" 4 epochs of 5 steps: the variable w grows by 1 per step. It backs up every
 * 3 steps, prints each step and where it resumed, and with {@code args[1] = "e:s"} stops for good
 * after that step (for the parent's SIGKILL).
 */
public final class TrainWithBackup {
  static final int EPOCHS = 4;
  static final int STEPS = 5;

  public static void main(String[] args) throws Exception {
    Path dir = new Path(args[0]);
    String stopAfter = args.length > 1 ? args[1] : "";
    BackupAndRestore backup = new BackupAndRestore(dir.getFileSystem(new Configuration()), dir,
        WritePolicy.SINGLE_WORKER, BackupAndRestore.everySteps(3));
    float[] w = {0};
    int startEpoch = 0;
    int startStep = 0;
    Optional<BackupAndRestore.ResumePoint> resume = backup.restore(EPOCHS, STEPS, Map.of("w", Tensor.ofFloats(new long[] {1}, 0)));
    if (resume.isPresent()) {
      startEpoch = resume.get().epoch();
      startStep = resume.get().step();
      w[0] = resume.get().variables().get("w").floats()[0];
      System.out.println("RESUMED epoch=" + startEpoch + " step=" + startStep + " w=" + w[0]);
    }
    for (int epoch = startEpoch; epoch < EPOCHS; epoch++) {
      for (int step = epoch == startEpoch ? startStep : 0; step < STEPS; step++) {
        w[0] += 1;
        System.out.println("STEP " + epoch + ":" + step + " w=" + w[0]);
        backup.onStepEnd(epoch, step, () -> Map.of("w", Tensor.ofFloats(new long[] {1}, w[0])));
        if (stopAfter.equals(epoch + ":" + step)) {
          System.out.println("STOPPED");
          System.out.flush();
          Thread.sleep(Long.MAX_VALUE);
        }
      }
      backup.onEpochEnd(epoch, () -> Map.of("w", Tensor.ofFloats(new long[] {1}, w[0])));
    }
    backup.onTrainEnd();
    System.out.println("DONE w=" + w[0]);
  }
}
