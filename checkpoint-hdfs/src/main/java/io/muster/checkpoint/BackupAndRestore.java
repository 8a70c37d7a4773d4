package io.muster.checkpoint;

import io.muster.strategy.PreemptedException;
import io.muster.strategy.Preemption;
import java.io.FileNotFoundException;
import java.io.IOException;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Optional;
import java.util.OptionalInt;
import java.util.OptionalLong;
import java.util.function.Supplier;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Keras 2's {@code BackupAndRestore}: lets a restarted gang (a retried Spark stage, a new YARN
 * attempt) continue where the job stopped instead of starting over.
 *
 * <p>The chief keeps {@code backup_dir/chief/} with one checkpoint: the model's variables and the
 * epoch and step counters; the other tasks write the same backup to
 * {@code backup_dir/workertemp_<i>}, deleted after each save. At the start every task calls
 * {@link #restore(int, int, Map)}, which reads {@code backup_dir/chief} and refuses a backup of
 * another model or run. With {@link #EVERY_EPOCH} a backup is
 * made at each epoch's end and training resumes at the next epoch; with {@link #everySteps(int)} a
 * backup is made every N steps (counted across epochs) and training resumes at the step after the
 * backed-up one (the next epoch's first step when it was an epoch's last). When training ends
 * successfully the chief deletes the backup. {@link #close()} ends the threads its backups write
 * through. Given the strategy's {@link Preemption} ({@link #saveOnPreemption}), it also backs up at
 * the step the gang agreed to save at when the cluster announced it would take a container, and the
 * next run resumes at the step after it.
 */
public final class BackupAndRestore implements AutoCloseable {

  /** Where training resumes, and the variables to resume with. */
  public record ResumePoint(int epoch, int step, Map<String, Tensor> variables) {}

  static final String EPOCH_KEY = "ckpt_saved_epoch/.ATTRIBUTES/VARIABLE_VALUE";
  static final String STEP_KEY = "ckpt_saved_batch/.ATTRIBUTES/VARIABLE_VALUE";
  /** Back up at the end of every epoch (Keras' {@code save_freq="epoch"}). */
  public static final int EVERY_EPOCH = 0;
  private static final Logger log = LoggerFactory.getLogger(BackupAndRestore.class);

  private final FileSystem fs;
  private final Path backupDir;
  private final WritePolicy policy;
  private final int saveEverySteps;
  private final CheckpointManager writer;
  private int stepsSinceBackup;
  private long stepsThisRun;
  private Preemption preemption;

  /**
   * @param saveEverySteps {@link #EVERY_EPOCH}, or a step count from {@link #everySteps(int)}
   */
  public BackupAndRestore(FileSystem fs, Path backupDir, WritePolicy policy, int saveEverySteps) throws IOException {
    if (saveEverySteps < 0) {
      throw new IllegalArgumentException("saveEverySteps must be EVERY_EPOCH (0) or a positive step count, was "
          + saveEverySteps);
    }
    this.fs = AtomicFiles.unwrap(fs);
    this.backupDir = this.fs.makeQualified(backupDir);
    this.policy = policy;
    this.saveEverySteps = saveEverySteps;
    CheckpointManager.Options one = new CheckpointManager.Options(OptionalInt.of(1), Optional.empty(), "ckpt");
    this.writer = policy.chief()
        ? new CheckpointManager(this.fs, chiefDir(), new WritePolicy(true, 0, policy.writer()), one)
        : new CheckpointManager(this.fs, this.backupDir, policy, one);
  }

  public static int everySteps(int steps) {
    if (steps <= 0) {
      throw new IllegalArgumentException("save frequency must be a positive number of steps, was " + steps);
    }
    return steps;
  }

  private Path chiefDir() {
    return new Path(backupDir, "chief");
  }

  /**
   * The point to resume from, read from the chief's backup; empty when there is none (a fresh start).
   * The backup must be this run's: it must hold exactly the caller's variables (names, dtypes and
   * shapes of {@code like}; their values do not matter), and must not be past the run's last epoch
   * (a backup of the last epoch, left when the run was stopped before {@link #onTrainEnd}, resumes
   * at {@code epochs}: nothing is left to train).
   *
   * @param epochs how many epochs the run trains
   * @param stepsPerEpoch to tell whether the backed-up step was an epoch's last
   * @param like the model's variables, as they will be backed up
   * @throws CheckpointMismatchException when the backup belongs to another run, saying what differs
   */
  public Optional<ResumePoint> restore(int epochs, int stepsPerEpoch, Map<String, Tensor> like) throws IOException {
    Optional<Path> latest = CheckpointManager.latestCheckpoint(fs, chiefDir());
    if (latest.isEmpty()) {
      return Optional.empty();
    }
    BundleReader reader = BundleReader.open(fs, latest.get());
    if (!reader.entries().containsKey(EPOCH_KEY) || !reader.entries().containsKey(STEP_KEY)) {
      throw new IOException(latest.get() + " is not a BackupAndRestore checkpoint: it has no epoch and step counters");
    }
    Map<String, Tensor> expected = new LinkedHashMap<>(like);
    expected.put(EPOCH_KEY, Tensor.scalar(0));
    expected.put(STEP_KEY, Tensor.scalar(0));
    reader.requireVariables(expected);
    Map<String, Tensor> saved = new LinkedHashMap<>(reader.readAll());
    int epoch = (int) saved.remove(EPOCH_KEY).longs()[0];
    int step = (int) saved.remove(STEP_KEY).longs()[0];
    ResumePoint point;
    if (step < 0) {
      point = new ResumePoint(epoch + 1, 0, saved);
    } else if (step == stepsPerEpoch - 1) {
      point = new ResumePoint(epoch + 1, 0, saved);
    } else {
      point = new ResumePoint(epoch, step + 1, saved);
    }
    if (point.epoch() > epochs) {
      throw new CheckpointMismatchException(latest.get() + " was backed up in epoch " + (epoch + 1) + ", past this run's "
          + epochs + " epochs");
    }
    log.info("resuming from {} (backed up at epoch {} step {}): epoch {} step {}", latest.get(), epoch, step,
        point.epoch(), point.step());
    return Optional.of(point);
  }

  /**
   * Saves at the step the gang agrees on when the cluster announces a preemption, then ends the
   * step with {@link PreemptedException}; {@link #onStepEnd} must then run after every step.
   */
  public BackupAndRestore saveOnPreemption(Preemption notice) {
    this.preemption = notice;
    return this;
  }

  /**
   * After each completed step ({@code epoch} and {@code step} from 0): backs up when
   * {@code saveEverySteps} steps have passed since the last backup, and at the step the gang agreed on
   * for a preemption, after which it throws.
   *
   * @throws PreemptedException after the backup made for a preemption: the task should leave now
   */
  public void onStepEnd(int epoch, int step, Supplier<Map<String, Tensor>> variables) throws IOException {
    stepsThisRun++;
    boolean backedUp = false;
    if (saveEverySteps != EVERY_EPOCH && ++stepsSinceBackup >= saveEverySteps) {
      stepsSinceBackup = 0;
      backup(epoch, step, variables.get());
      backedUp = true;
    }
    if (preemption != null && preemption.saveAfter(stepsThisRun)) {
      if (!backedUp) {
        backup(epoch, step, variables.get());
      }
      OptionalLong sinceNotice = preemption.nanosSinceNotice();
      String since = sinceNotice.isPresent() ? ", " + sinceNotice.getAsLong() / 1_000_000 + " ms after the notice" : "";
      log.info("backed up after step {} of epoch {} for preemption{}", step + 1, epoch + 1, since);
      throw new PreemptedException("saved after step " + (step + 1) + " of epoch " + (epoch + 1)
          + " for preemption; run again to resume there");
    }
  }

  /** At each epoch's end: backs up in epoch mode. */
  public void onEpochEnd(int epoch, Supplier<Map<String, Tensor>> variables) throws IOException {
    if (saveEverySteps == EVERY_EPOCH) {
      backup(epoch, -1, variables.get());
    }
  }

  private void backup(int epoch, int step, Map<String, Tensor> variables) throws IOException {
    Map<String, Tensor> tensors = new LinkedHashMap<>(variables);
    tensors.put(EPOCH_KEY, Tensor.scalar(epoch));
    tensors.put(STEP_KEY, Tensor.scalar(step));
    writer.save(tensors);
  }

  @Override
  public void close() {
    writer.close();
  }

  /** Training finished: the chief deletes {@code backup_dir/chief}; the others have nothing left to delete. */
  public void onTrainEnd() throws IOException {
    if (policy.chief()) {
      try {
        fs.delete(chiefDir(), true);
      } catch (FileNotFoundException e) {
        // already gone
      }
    }
  }
}
