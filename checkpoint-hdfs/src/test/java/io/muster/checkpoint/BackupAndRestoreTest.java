package io.muster.checkpoint;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.muster.cluster.ClusterSpec;
import io.muster.cluster.HostPort;
import io.muster.cluster.TaskId;
import io.muster.internal.rpc.TaskServer;
import io.muster.rpc.Security;
import io.muster.strategy.MultiWorkerMirroredStrategy;
import io.muster.strategy.PreemptedException;
import io.muster.strategy.Preemption;
import io.muster.testing.ChildJvm;
import io.muster.testing.LocalCluster;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class BackupAndRestoreTest {

  @TempDir
  java.nio.file.Path tmp;

  private static final Map<String, Tensor> W = Map.of("w", Tensor.ofFloats(new long[] {1}, 0));
  private static final java.nio.file.Path LOGS = java.nio.file.Path.of("target", "child-logs");

  @Test
  void aKilledRunResumesAtTheStepAfterTheLastBackupWithItsVariables() throws Exception {
    Path dir = new Path(tmp.resolve("backup").toUri());
    // Backups every 3 steps: after global steps 3, 6, 9 = (epoch 1, step 3). Killed after (2, 0).
    try (ChildJvm first = ChildJvm.start("train-1", TrainWithBackup.class, List.of(dir.toString(), "2:0"), Map.of(), LOGS)) {
      first.awaitOutput("STOPPED", Duration.ofSeconds(60));
      first.kill();
    }
    try (ChildJvm second = ChildJvm.start("train-2", TrainWithBackup.class, List.of(dir.toString()), Map.of(), LOGS)) {
      assertEquals(0, second.waitFor(Duration.ofSeconds(60)), second.output());
      String out = second.output();
      assertTrue(out.contains("RESUMED epoch=1 step=4 w=9.0"), out);
      assertTrue(out.startsWith("RESUMED") || out.indexOf("STEP") > out.indexOf("RESUMED"), out);
      assertTrue(out.contains("DONE w=20.0"), "every step ran exactly once over both runs: " + out);
    }
    FileSystem fs = FileSystem.getLocal(new Configuration()).getRawFileSystem();
    assertFalse(fs.exists(new Path(dir, "chief")), "the backup is deleted after a successful run");
  }

  private static final TaskId WORKER = new TaskId("worker", 0);
  private static final Security SECURITY = Security.of(LocalCluster.TOKEN);

  /** A strategy of one worker, whose {@link Preemption} the preemption tests give notices to. */
  private static MultiWorkerMirroredStrategy oneWorker(TaskServer server) {
    return MultiWorkerMirroredStrategy.builder()
        .cluster(ClusterSpec.of(Map.of("worker", List.of(server.address().toString()))), WORKER)
        .security(SECURITY).server(server).join();
  }

  /**
   * With a one-worker strategy's {@link Preemption}: a notice after step 9 makes step 10 the save
   * step, where the every-5-steps backup also falls; the step is backed up once (ckpt-2, after
   * ckpt-1 at step 5), the step ends in {@link PreemptedException}, and the next run resumes at step 10 (0-based).
   */
  @Test
  void aPreemptionBacksUpOnceAtTheAgreedStepAndResumesRightAfterIt() throws Exception {
    FileSystem fs = FileSystem.getLocal(new Configuration()).getRawFileSystem();
    Path dir = new Path(tmp.resolve("preempted").toUri());
    try (TaskServer server = TaskServer.start(WORKER, new HostPort("127.0.0.1", 0), SECURITY);
        MultiWorkerMirroredStrategy strategy = oneWorker(server);
        BackupAndRestore backup = new BackupAndRestore(fs, dir, WritePolicy.SINGLE_WORKER,
            BackupAndRestore.everySteps(5)).saveOnPreemption(strategy.preemption())) {
      float[] w = {0};
      PreemptedException left = assertThrows(PreemptedException.class, () -> {
        for (int step = 0; step < 100; step++) {
          w[0] += 1;
          if (step == 8) {
            strategy.preemption().notice("a test's notice");
          }
          backup.onStepEnd(0, step, () -> Map.of("w", Tensor.ofFloats(new long[] {1}, w[0])));
        }
      });
      assertEquals("saved after step 10 of epoch 1 for preemption; run again to resume there", left.getMessage());
    }
    assertEquals(Optional.of(new Path(new Path(dir, "chief"), "ckpt-2")),
        CheckpointManager.latestCheckpoint(fs, new Path(dir, "chief")), "backed up at step 5 and once at step 10");
    BackupAndRestore.ResumePoint point = new BackupAndRestore(fs, dir, WritePolicy.SINGLE_WORKER,
        BackupAndRestore.everySteps(5)).restore(1, 100, W).orElseThrow();
    assertEquals(List.of(0, 10, 10f), List.of(point.epoch(), point.step(), point.variables().get("w").floats()[0]));
  }

  /**
   * A notice that comes while a backup is being written (step 5's, 0-based 4) is acted on at the
   * next step; another while the preemption's own backup is written changes nothing: one save, one
   * {@link PreemptedException}, and a backup that restores.
   */
  @Test
  void noticesThatArriveDuringSavesGiveOneSaveAtTheNextStepAndAWholeBackup() throws Exception {
    FileSystem fs = FileSystem.getLocal(new Configuration()).getRawFileSystem();
    Path dir = new Path(tmp.resolve("during-saves").toUri());
    int[] suppliedAt = new int[2];
    try (TaskServer server = TaskServer.start(WORKER, new HostPort("127.0.0.1", 0), SECURITY);
        MultiWorkerMirroredStrategy strategy = oneWorker(server);
        BackupAndRestore backup = new BackupAndRestore(fs, dir, WritePolicy.SINGLE_WORKER,
            BackupAndRestore.everySteps(5)).saveOnPreemption(strategy.preemption())) {
      float[] w = {0};
      int[] saves = {0};
      PreemptedException left = assertThrows(PreemptedException.class, () -> {
        for (int step = 0; step < 100; step++) {
          w[0] += 1;
          int current = step;
          backup.onStepEnd(0, step, () -> {
            suppliedAt[saves[0]++] = current;
            strategy.preemption().notice("a notice during the backup of step " + current); // mid-save
            return Map.of("w", Tensor.ofFloats(new long[] {1}, w[0]));
          });
        }
      });
      assertEquals("saved after step 6 of epoch 1 for preemption; run again to resume there", left.getMessage());
      assertEquals(2, saves[0], "the periodic backup and the preemption's, no third");
    }
    assertArrayEquals(new int[] {4, 5}, suppliedAt);
    BackupAndRestore.ResumePoint point = new BackupAndRestore(fs, dir, WritePolicy.SINGLE_WORKER,
        BackupAndRestore.everySteps(5)).restore(1, 100, W).orElseThrow();
    assertEquals(List.of(0, 6, 6f), List.of(point.epoch(), point.step(), point.variables().get("w").floats()[0]));
  }

  @Test
  void epochModeResumesAtTheNextEpochAndOtherTasksWriteToTheirTempDir() throws Exception {
    FileSystem fs = FileSystem.getLocal(new Configuration()).getRawFileSystem();
    Path dir = new Path(tmp.resolve("epochs").toUri());
    BackupAndRestore chief = new BackupAndRestore(fs, dir, WritePolicy.SINGLE_WORKER, BackupAndRestore.EVERY_EPOCH);
    BackupAndRestore worker = new BackupAndRestore(fs, dir, new WritePolicy(false, 1), BackupAndRestore.EVERY_EPOCH);
    assertEquals(Optional.empty(), chief.restore(2, 10, W));
    for (int epoch = 0; epoch < 2; epoch++) {
      float value = epoch + 1;
      chief.onStepEnd(epoch, 9, () -> Map.of());
      chief.onEpochEnd(epoch, () -> Map.of("w", Tensor.ofFloats(new long[] {1}, value)));
      worker.onEpochEnd(epoch, () -> Map.of("w", Tensor.ofFloats(new long[] {1}, -value)));
    }
    assertFalse(fs.exists(new Path(dir, "workertemp_1")), "the worker's temp backup is deleted after each save");
    BackupAndRestore restarted = new BackupAndRestore(fs, dir, new WritePolicy(false, 1), BackupAndRestore.EVERY_EPOCH);
    BackupAndRestore.ResumePoint point = restarted.restore(2, 10, W).orElseThrow();
    assertEquals(2, point.epoch());
    assertEquals(0, point.step());
    assertEquals(2f, point.variables().get("w").floats()[0], "every task restores the chief's backup");
    assertEquals(1, fs.globStatus(new Path(new Path(dir, "chief"), "ckpt-*.index")).length, "one backup is kept");
  }

  @Test
  void aBackupOfAnotherModelIsRefusedSayingWhatDiffers() throws Exception {
    FileSystem fs = FileSystem.getLocal(new Configuration()).getRawFileSystem();
    Path dir = new Path(tmp.resolve("stale").toUri());
    BackupAndRestore digits = new BackupAndRestore(fs, dir, WritePolicy.SINGLE_WORKER, BackupAndRestore.EVERY_EPOCH);
    digits.onEpochEnd(11, () -> Map.of("weights", Tensor.ofFloats(new long[] {64, 10}, new float[640]),
        "bias", Tensor.ofFloats(new long[] {10}, new float[10])));
    BackupAndRestore blobs = new BackupAndRestore(fs, dir, WritePolicy.SINGLE_WORKER, BackupAndRestore.EVERY_EPOCH);
    CheckpointMismatchException e = assertThrows(CheckpointMismatchException.class, () -> blobs.restore(400, 10,
        Map.of("weights", Tensor.ofFloats(new long[] {20, 10}, new float[200]),
            "bias", Tensor.ofFloats(new long[] {10}, new float[10]))));
    assertEquals(new Path(new Path(dir, "chief"), "ckpt-1") + " holds another model: weights is float32[64, 10] there"
        + " but float32[20, 10] here", e.getMessage());
    CheckpointMismatchException names = assertThrows(CheckpointMismatchException.class,
        () -> blobs.restore(400, 10, Map.of("kernel", Tensor.ofFloats(new long[] {10}, new float[10]),
            "bias", Tensor.ofFloats(new long[] {10}, new float[10]))));
    assertTrue(names.getMessage().endsWith("holds another model: kernel is missing there; it also holds weights"),
        names.getMessage());
  }

  @Test
  void aBackupPastTheRunsLastEpochIsAnErrorNotZeroEpochs() throws Exception {
    FileSystem fs = FileSystem.getLocal(new Configuration()).getRawFileSystem();
    Path dir = new Path(tmp.resolve("long").toUri());
    BackupAndRestore first = new BackupAndRestore(fs, dir, WritePolicy.SINGLE_WORKER, BackupAndRestore.EVERY_EPOCH);
    first.onEpochEnd(11, () -> W);
    BackupAndRestore shorter = new BackupAndRestore(fs, dir, WritePolicy.SINGLE_WORKER, BackupAndRestore.EVERY_EPOCH);
    CheckpointMismatchException e = assertThrows(CheckpointMismatchException.class, () -> shorter.restore(10, 5, W));
    assertEquals(new Path(new Path(dir, "chief"), "ckpt-1") + " was backed up in epoch 12, past this run's 10 epochs",
        e.getMessage());
    assertEquals(12, shorter.restore(12, 5, W).orElseThrow().epoch(), "the last epoch's backup: nothing left to train");
  }
}
