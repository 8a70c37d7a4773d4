package io.muster.checkpoint;

import java.util.OptionalInt;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.Path;

/**
 * A child JVM that saves a checkpoint whose every tensor holds {@code args[1]} into {@code args[0]}
 * and stops for good at save step {@code args[2]} (printing {@code AT <step>}), so that the parent
 * can kill it with SIGKILL exactly there.
 */
public final class SaveAndStop {
  public static void main(String[] args) throws Exception {
    Path dir = new Path(args[0]);
    float value = Float.parseFloat(args[1]);
    SaveStep stopAt = SaveStep.valueOf(args[2]);
    CheckpointManager manager = new CheckpointManager(dir.getFileSystem(new Configuration()), dir,
        WritePolicy.SINGLE_WORKER, new CheckpointManager.Options(OptionalInt.of(1), java.util.Optional.empty(), "ckpt"),
        step -> {
          if (step == stopAt) {
            System.out.println("AT " + step);
            System.out.flush();
            try {
              Thread.sleep(Long.MAX_VALUE);
            } catch (InterruptedException e) {
              Thread.currentThread().interrupt();
            }
          }
        });
    manager.save(KilledSaveTest.model(value));
  }
}
