package io.muster.spark;

import io.muster.checkpoint.BackupAndRestore;
import io.muster.checkpoint.CheckpointManager;
import io.muster.checkpoint.WritePolicy;
import io.muster.cluster.TaskId;
import io.muster.strategy.MultiWorkerMirroredStrategy;
import io.muster.summary.SummaryWriter;
import java.io.IOException;
import java.util.Iterator;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;

/**
 * One barrier task's view of the job.
 *
 * @param strategy joined to every other task; collectives, barrier, chief rules
 * @param rows this task's partition (one shard of the repartitioned data), to be read once
 * @param task {@code worker <partition id>}
 * @param attempt 0 for the first run of the gang, 1, 2, ... when {@link BarrierTrainer} re-runs it
 * @param gpus the CUDA devices this task owns, as {@code CUDA_VISIBLE_DEVICES} would list them;
 *     empty when the trainer asks for no GPUs
 */
public record TrainContext<T>(MultiWorkerMirroredStrategy strategy, Iterator<T> rows, TaskId task, int attempt,
    java.util.List<String> gpus) {

  /** Where this task writes: the real directory on the chief, {@code workertemp_<i>} on the others. */
  public WritePolicy writePolicy() {
    return WritePolicy.of(strategy.cluster(), task);
  }

  /** A checkpoint manager for {@code dir} (any Hadoop URI) with this task's write policy. */
  public CheckpointManager checkpointManager(String dir, CheckpointManager.Options options) throws IOException {
    Path path = new Path(dir);
    return new CheckpointManager(fileSystem(path), path, writePolicy(), options);
  }

  /** A TensorBoard writer for {@code logDir}; only the chief's events stay. */
  public SummaryWriter summaryWriter(String logDir) throws IOException {
    Path path = new Path(logDir);
    return SummaryWriter.create(fileSystem(path), path, writePolicy(), SummaryWriter.Options.DEFAULTS);
  }

  /** Backup and restore under {@code dir}, so a re-run gang resumes instead of starting over. */
  public BackupAndRestore backupAndRestore(String dir, int saveEverySteps) throws IOException {
    Path path = new Path(dir);
    return new BackupAndRestore(fileSystem(path), path, writePolicy(), saveEverySteps);
  }

  private static FileSystem fileSystem(Path path) throws IOException {
    return path.getFileSystem(new Configuration());
  }
}
