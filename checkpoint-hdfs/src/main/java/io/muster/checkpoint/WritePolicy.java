package io.muster.checkpoint;

import io.muster.cluster.ClusterSpec;
import io.muster.cluster.Roles;
import io.muster.cluster.TaskId;
import io.muster.cluster.TaskType;
import java.io.IOException;
import java.util.Optional;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;

/**
 * TensorFlow's rule for who writes where ({@code distributed_file_utils}): the chief, and any task
 * of a single-worker job, writes to the directory it was given; every other task writes to
 * {@code <dir>/workertemp_<task index>} ({@code workertemp_<i>-attempt<n>} in a numbered attempt),
 * which is deleted after each save, whether the save succeeded or not. Deleting twice is harmless.
 *
 * <p>A task a launcher runs in a numbered attempt of a job also names its {@link Writer}: a chief's
 * checkpoint directories are then fenced, so that a chief of an earlier attempt, cut off and healed
 * late, cannot overwrite or delete what a later attempt wrote ({@link StaleWriterException}).
 *
 * @param chief whether this task writes the authoritative copy
 * @param taskIndex the index in the temp directory's name (TensorFlow uses the index only)
 * @param writer the job run and attempt this task belongs to, where a launcher numbers them
 */
public record WritePolicy(boolean chief, int taskIndex, Optional<Writer> writer) {

  /** A single-process job: always writes to the given directory. */
  public static final WritePolicy SINGLE_WORKER = new WritePolicy(true, 0);

  /** One run of a job (the same across its attempts, another for the next run) and one of its attempts (from 0). */
  public record Writer(String run, int attempt) {
    public Writer {
      if (run.isBlank() || run.contains(" ") || attempt < 0) {
        throw new IllegalArgumentException("a writer is a run id without spaces and an attempt >= 0; was '" + run
            + "' and " + attempt);
      }
    }
  }

  public WritePolicy {
    java.util.Objects.requireNonNull(writer, "writer");
  }

  /** A policy without a writer: its directories are not fenced. */
  public WritePolicy(boolean chief, int taskIndex) {
    this(chief, taskIndex, Optional.empty());
  }

  /** This policy for a task of {@code attempt} of job run {@code run}. */
  public WritePolicy forAttempt(String run, int attempt) {
    return new WritePolicy(chief, taskIndex, Optional.of(new Writer(run, attempt)));
  }

  /** The policy of a task in a cluster: chief-like when it is the chief or when chief and workers number one. */
  public static WritePolicy of(ClusterSpec cluster, TaskId task) {
    boolean multiWorker = cluster.numTasks(TaskType.CHIEF) + cluster.numTasks(TaskType.WORKER) > 1;
    return new WritePolicy(!multiWorker || Roles.isChief(cluster, task), task.index());
  }

  /** The directory this task writes to for {@code dir}; created when it is a temp directory. */
  public Path writeDir(FileSystem fs, Path dir) throws IOException {
    if (chief) {
      return dir;
    }
    Path temp = isTempDir(dir) ? dir : new Path(dir, tempName());
    fs.mkdirs(temp);
    return temp;
  }

  /** {@code dir/file} for the chief, {@code dir/workertemp_<i>/file} for the others. */
  public Path writeFile(FileSystem fs, Path file) throws IOException {
    return new Path(writeDir(fs, file.getParent()), file.getName());
  }

  /** Deletes this task's temp directory under {@code dir} (or {@code dir} itself when it is one); no-op for the chief. */
  public void removeTempDir(FileSystem fs, Path dir) throws IOException {
    if (!chief) {
      fs.delete(isTempDir(dir) ? dir : new Path(dir, tempName()), true);
    }
  }

  /**
   * TensorFlow's {@code workertemp_<i>}; in a launcher's attempt, {@code workertemp_<i>-attempt<n>}:
   * a task of an earlier attempt, cut off and healed after the next attempt started, then deletes
   * its own temp directory, never the one the next attempt's task of the same index writes.
   */
  private String tempName() {
    return "workertemp_" + taskIndex + writer.map(w -> "-attempt" + (w.attempt() + 1)).orElse("");
  }

  private boolean isTempDir(Path dir) {
    return dir.getName().equals(tempName());
  }
}
