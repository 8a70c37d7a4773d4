package io.muster.spark;

import io.muster.checkpoint.BackupAndRestore;
import io.muster.checkpoint.CheckpointManager;
import io.muster.checkpoint.WritePolicy;
import io.muster.cluster.TaskId;
import io.muster.strategy.MultiWorkerMirroredStrategy;
import io.muster.summary.SummaryWriter;
import java.io.IOException;
import java.util.Iterator;
import java.util.List;
import java.util.function.Consumer;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;

/**
 * One barrier task's view of the job.
 *
 * <p>{@link #strategy()}: joined to every other task (collectives, barrier, chief rules);
 * {@link #rows()}: this task's partition (one shard of the repartitioned data), to be read once;
 * {@link #task()}: {@code chief 0} or {@code worker <i>}; {@link #attempt()}: 0 for the first run of
 * the gang, 1, 2, ... when {@link BarrierTrainer} re-runs it; {@link #gpus()}: the CUDA devices this
 * task owns, as {@code CUDA_VISIBLE_DEVICES} would list them (empty when the trainer asks for no
 * GPUs); {@link #hadoopConfiguration()}: the driver's Hadoop configuration (with its
 * {@code spark.hadoop.*} settings), from which every file system of this context is made;
 * {@link #progress}: a line for the driver's console.
 */
public final class TrainContext<T> {
  private final MultiWorkerMirroredStrategy strategy;
  private final Iterator<T> rows;
  private final TaskId task;
  /** This fit call's id, the same in each of its attempts. */
  private final String run;
  private final int attempt;
  private final List<String> gpus;
  private final Configuration hadoopConfiguration;
  private final Consumer<String> progress;

  TrainContext(MultiWorkerMirroredStrategy strategy, Iterator<T> rows, TaskId task, String run, int attempt,
      List<String> gpus, Configuration hadoopConfiguration, Consumer<String> progress) {
    this.strategy = strategy;
    this.rows = rows;
    this.task = task;
    this.run = run;
    this.attempt = attempt;
    this.gpus = List.copyOf(gpus);
    this.hadoopConfiguration = hadoopConfiguration;
    this.progress = progress;
  }

  public MultiWorkerMirroredStrategy strategy() {
    return strategy;
  }

  public Iterator<T> rows() {
    return rows;
  }

  public TaskId task() {
    return task;
  }

  public int attempt() {
    return attempt;
  }

  public List<String> gpus() {
    return gpus;
  }

  public Configuration hadoopConfiguration() {
    return hadoopConfiguration;
  }

  /**
   * Shows {@code line} on the driver's console: it is sent to the driver, which logs it at INFO
   * (logger {@code io.muster.spark.Progress}) as written, whichever host this task runs on. A task
   * that cannot reach the driver logs it in its executor's log instead.
   */
  public void progress(String line) {
    progress.accept(line);
  }

  /**
   * Where this task writes: the real directory on the chief, {@code workertemp_<i>} on the others;
   * the chief's directories are fenced by this attempt (a chief of an earlier attempt cannot
   * overwrite what this one saved).
   */
  public WritePolicy writePolicy() {
    return WritePolicy.of(strategy.cluster(), task).forAttempt(run, attempt);
  }

  /** A checkpoint manager for {@code dir} (any Hadoop file system) with this task's write policy; close it. */
  public CheckpointManager checkpointManager(Path dir, CheckpointManager.Options options) throws IOException {
    return new CheckpointManager(fileSystem(dir), dir, writePolicy(), options);
  }

  /** A TensorBoard writer for {@code logDir}; only the chief's events stay. */
  public SummaryWriter summaryWriter(Path logDir) throws IOException {
    return SummaryWriter.create(fileSystem(logDir), logDir, writePolicy(), SummaryWriter.Options.DEFAULTS);
  }

  /** Backup and restore under {@code dir}, so a re-run gang resumes instead of starting over; close it. */
  public BackupAndRestore backupAndRestore(Path dir, int saveEverySteps) throws IOException {
    return new BackupAndRestore(fileSystem(dir), dir, writePolicy(), saveEverySteps);
  }

  /** The file system of {@code path}, made from the driver's Hadoop configuration. */
  public FileSystem fileSystem(Path path) throws IOException {
    return path.getFileSystem(hadoopConfiguration);
  }
}
