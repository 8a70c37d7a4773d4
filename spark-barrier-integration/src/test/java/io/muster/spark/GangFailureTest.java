package io.muster.spark;

import static org.junit.jupiter.api.Assertions.assertEquals;

import io.muster.launch.GangSpec;
import org.apache.spark.SparkException;
import org.junit.jupiter.api.Test;

/** A failed gang run in words, from the messages Spark 4.1 gives the driver (copied from real runs, frames cut short). */
class GangFailureTest {

  private static final String ABORTED = "Job aborted due to stage failure: Could not recover from a failed barrier "
      + "ResultStage. Most recent failure reason: Stage failed because barrier task ResultTask(7, %d) finished "
      + "unsuccessfully.\n";
  private static final String FRAMES = "\n\tat io.muster.spark.BarrierTask.apply(BarrierTask.java:86)\n"
      + "\tat org.apache.spark.scheduler.Task.run(Task.scala:147)\n\t... 3 more\n";

  private static String describe(int partition, String taskFailure, GangSpec gang) {
    return GangFailure.describe(new SparkException(String.format(ABORTED, partition) + taskFailure + FRAMES), gang);
  }

  @Test
  void aCommandsOwnExitNamesTheMemberOnce() {
    assertEquals("worker 0: `false` exited with code 1; it wrote nothing to stderr", describe(0,
        "io.muster.spark.UsersFailureException: worker 0: `false` exited with code 1; it wrote nothing to stderr",
        GangSpec.workers(2)));
  }

  @Test
  void aCommandKilledByASignalIsToldAsItsTaskToldIt() {
    assertEquals("worker 1: `sh -c x` exited with code 137 (killed by signal 9); it wrote nothing to stderr",
        describe(1, "java.lang.IllegalStateException: worker 1: `sh -c x` exited with code 137 (killed by signal 9); "
            + "it wrote nothing to stderr", GangSpec.workers(2)));
  }

  @Test
  void thePeerThatWasAbortedPointsAtTheMemberThatFailedFirst() {
    assertEquals("worker 1: RetryableException: --crash-once-at-epoch 3: worker 1 crashes in epoch 3 of the first "
        + "run, as asked", describe(3, "io.muster.collective.CollectiveException: Collective ops is aborted by: "
        + "worker 1 failed: io.muster.spark.RetryableException: --crash-once-at-epoch 3: worker 1 crashes in epoch 3 "
        + "of the first run, as asked\nThe error could be from a previous operation. Restart your program to reset.",
        GangSpec.workers(4)));
  }

  @Test
  void theReportedTasksOwnErrorIsNamedByItsMember() {
    assertEquals("worker 1: RetryableException: --crash-once-at-epoch 3: worker 1 crashes in epoch 3 of the first "
        + "run, as asked", describe(1, "io.muster.spark.RetryableException: --crash-once-at-epoch 3: worker 1 crashes "
        + "in epoch 3 of the first run, as asked", GangSpec.workers(4)));
    assertEquals("chief 0: IllegalStateException: disk full", describe(0, "java.lang.IllegalStateException: disk full",
        GangSpec.of(1, 2, 0, 0)));
  }

  @Test
  void aStderrTailStaysIndentedUnderTheLine() {
    assertEquals("worker 1: `sh -c x` exited with code 3; the last 2 lines of its stderr:\n  boom 1\n  boom 2",
        describe(1, "io.muster.spark.UsersFailureException: worker 1: `sh -c x` exited with code 3; the last 2 lines "
            + "of its stderr:\n  boom 1\n  boom 2", GangSpec.workers(2)));
  }

  @Test
  void aPeerEndedBecauseOfTheFirstFailureTellsTheFirstsStory() {
    assertEquals("worker 0: `sh -c x` exited with code 3; the last 2 lines of its stderr:\n  boom 1\n  boom 2",
        describe(1, "io.muster.spark.UsersFailureException: worker 1: `sh -c x` was ended (exit code 143) because the "
            + "gang failed: worker 0: `sh -c x` exited with code 3; the last 2 lines of its stderr:\n  boom 1\n  boom 2",
            GangSpec.workers(2)));
    assertEquals("worker 0's task ended before its command's exit was reported (the task failed or was killed)",
        describe(1, "java.lang.IllegalStateException: worker 1: `false` was ended (exit code 1) because the gang "
            + "failed: worker 0's task ended before its command's exit was reported (the task failed or was killed)",
            GangSpec.workers(2)));
  }

  @Test
  void withoutAnExceptionInItTheFirstLineIsKept() {
    assertEquals("Job aborted due to stage failure: Task 0 in stage 3.0 was killed (executor lost)",
        GangFailure.describe(new SparkException("Job aborted due to stage failure: Task 0 in stage 3.0 was killed "
            + "(executor lost)\nmore detail"), GangSpec.workers(2)));
  }
}
