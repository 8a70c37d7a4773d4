package io.muster.launch;

import io.muster.cluster.TaskId;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * When a gang's job has ended, and how: TonY's tracked/untracked rule with TensorFlow 2's defaults
 * ({@link GangSpec}). Launchers report each task's exit; the verdict is
 *
 * <ul>
 *   <li>{@link Failed} as soon as any task exits non-zero before the job has succeeded (a ps that
 *       dies breaks the training as surely as a worker that does);
 *   <li>{@link Succeeded} once every tracked task has exited 0, listing the untracked tasks still
 *       running, which the launcher now ends (SIGTERM, then SIGKILL after the grace period);
 *   <li>{@link Running} otherwise.
 * </ul>
 *
 * The first verdict other than {@code Running} stands: exits that follow it (the untracked tasks
 * the launcher ended, the tasks a failure took down) do not change it, with one exception. A
 * command's own failure ({@link Rerun#isCommandsOwn}) is often the symptom of a cluster's failure
 * the launcher hears of a moment later: until the launcher {@link #settle settles} the verdict
 * (after {@link Rerun#CAUSE_WINDOW}), a cluster's failure of another task replaces it. Thread-safe.
 */
public final class EndOfJob {

  /** What the job's state is after an exit. */
  public sealed interface Verdict permits Running, Succeeded, Failed {}

  public record Running() implements Verdict {}

  /** @param toEnd the untracked tasks still running, in member order */
  public record Succeeded(List<TaskId> toEnd) implements Verdict {}

  /** @param task the task whose failure ended the job; @param exitCode its exit code */
  public record Failed(TaskId task, int exitCode) implements Verdict {
    /** Whether the exit code is the command's own answer, which a re-run would repeat ({@link Rerun}). */
    public boolean isCommandsOwn() {
      return Rerun.isCommandsOwn(exitCode);
    }
  }

  private final GangSpec spec;
  private final Map<TaskId, Integer> exits = new LinkedHashMap<>();
  private Verdict verdict = new Running();
  private boolean settled;

  public EndOfJob(GangSpec spec) {
    this.spec = spec;
  }

  /** Records that {@code task} exited with {@code exitCode} and returns the verdict. */
  public synchronized Verdict exited(TaskId task, int exitCode) {
    spec.member(task); // a task outside the gang is a launcher's bug: fail loudly
    if (verdict instanceof Failed symptom && symptom.isCommandsOwn() && !settled && exitCode != 0
        && !Rerun.isCommandsOwn(exitCode) && exits.putIfAbsent(task, exitCode) == null) {
      verdict = new Failed(task, exitCode); // the cause
    }
    if (!(verdict instanceof Running)) {
      return verdict;
    }
    if (exits.putIfAbsent(task, exitCode) != null) {
      throw new IllegalStateException(task + " was reported to exit twice");
    }
    if (exitCode != 0) {
      verdict = new Failed(task, exitCode);
    } else if (spec.tasks().stream().filter(spec::isTracked).allMatch(exits::containsKey)) {
      verdict = new Succeeded(spec.tasks().stream().filter(t -> !exits.containsKey(t)).toList());
    }
    return verdict;
  }

  /** The launcher acts on the verdict: from now on no exit changes it. Returns it. */
  public synchronized Verdict settle() {
    settled = true;
    return verdict;
  }

  public synchronized Verdict verdict() {
    return verdict;
  }
}
