package io.muster.launch;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;

import io.muster.launch.Attempt.Failed;
import io.muster.launch.Attempt.Kind;
import io.muster.launch.Attempts.Done;
import io.muster.launch.Attempts.RunAgain;
import java.util.List;
import java.util.Optional;
import org.junit.jupiter.api.Test;

/** Which attempts run again and count, and the words every launcher says it in. */
class AttemptsTest {

  private static final String NOT_RERUN = Rerun.notRerun("--rerun any-failure");

  private static Failed failed(Kind kind, String report) {
    return new Failed(kind, report, kind == Kind.LOST ? Optional.of("a node went silent")
        : kind == Kind.PREEMPTED ? Optional.of("preempted") : Optional.empty(), List.of(), kind == Kind.PREEMPTED);
  }

  @Test
  void theFirstAttemptsSuccessSaysWhichItWas() {
    assertEquals(new Done(true, "succeeded on attempt 1 of 1", "succeeded on attempt 1 of 1"),
        new Attempts(1, Rerun.CLUSTER_FAILURES, NOT_RERUN).after(new Attempt.Succeeded()));
  }

  @Test
  void aCommandsOwnFailureIsNotRerunAndSaysHowToHaveItRerun() {
    Attempts attempts = new Attempts(3, Rerun.CLUSTER_FAILURES, NOT_RERUN);
    assertEquals(new Done(false, "attempt 1 of 3 failed, not re-run (" + NOT_RERUN + "): worker 0 exited with code 3",
        "failed on attempt 1 of 3, not re-run (" + NOT_RERUN + "): worker 0 exited with code 3"),
        attempts.after(failed(Kind.OWN, "worker 0 exited with code 3")));
  }

  @Test
  void underAnyFailureACommandsOwnFailureRunsAgainAndCounts() {
    Attempts attempts = new Attempts(2, Rerun.ANY_FAILURE, NOT_RERUN);
    RunAgain again = assertInstanceOf(RunAgain.class, attempts.after(failed(Kind.OWN, "worker 0 exited with code 3\n"
        + "  Traceback")));
    assertEquals("attempt 1 of 2 failed: worker 0 exited with code 3; re-running the gang", again.logLine());
    assertEquals(1, attempts.number());
    assertEquals(new Done(false, "attempt 1 of 2 failed: worker 0 exited with code 3\n  Traceback\nattempt 2 of 2 "
        + "failed: worker 1 exited with code 3", "failed on attempt 2 of 2: worker 1 exited with code 3"),
        attempts.after(failed(Kind.OWN, "worker 1 exited with code 3")));
  }

  @Test
  void aHostLostToTheClusterDoesNotCountAndTheSuccessSaysWhy() {
    Attempts attempts = new Attempts(1, Rerun.CLUSTER_FAILURES, NOT_RERUN);
    attempts.after(failed(Kind.LOST, "worker 1 on h2 (container c2) went silent: no word from it for 10 s"));
    assertEquals("attempt 2 (1 of 1 that count)", attempts.which());
    assertEquals(new Done(true, "succeeded on attempt 2 (1 of 1 that count); earlier attempts failed:\nattempt 1 of 1 "
        + "failed: worker 1 on h2 (container c2) went silent: no word from it for 10 s (a node went silent; this "
        + "attempt does not count)", "succeeded on attempt 2 (1 of 1 that count)"), attempts.after(new Attempt.Succeeded()));
  }

  @Test
  void aPreemptedAttemptDoesNotCountAndTheSuccessSaysWhoSaved() {
    Attempts attempts = new Attempts(1, Rerun.CLUSTER_FAILURES, NOT_RERUN);
    attempts.after(failed(Kind.PREEMPTED, "preemption notice for worker 0 (SIGPWR); every task saved (exit code 42)"));
    assertEquals(new Done(true, "succeeded on attempt 2 (1 of 1 that count) after 1 preemption; every task saved; "
        + "earlier attempts were preempted:\nattempt 1 of 1 preempted: preemption notice for worker 0 (SIGPWR); every "
        + "task saved (exit code 42) (this attempt does not count)", "succeeded on attempt 2 (1 of 1 that count) after 1 "
        + "preemption; every task saved"), attempts.after(new Attempt.Succeeded()));
  }

  @Test
  void theClustersFailuresCountUntilNoAttemptIsLeft() {
    Attempts attempts = new Attempts(2, Rerun.CLUSTER_FAILURES, NOT_RERUN);
    assertInstanceOf(RunAgain.class, attempts.after(failed(Kind.CLUSTER, "worker 0 exited with code 137")));
    Done done = assertInstanceOf(Done.class, attempts.after(failed(Kind.CLUSTER, "worker 1 exited with code 137")));
    assertEquals("failed on attempt 2 of 2: worker 1 exited with code 137", done.headline());
  }

  @Test
  void aClusterThatKeepsFailingCannotRunTheJobForEver() {
    Attempts attempts = new Attempts(1, Rerun.CLUSTER_FAILURES, NOT_RERUN);
    for (int n = 1; n < Attempts.UNCOUNTED_LIMIT; n++) {
      assertInstanceOf(RunAgain.class, attempts.after(failed(Kind.LOST, "lost " + n)));
    }
    Done done = assertInstanceOf(Done.class, attempts.after(failed(Kind.LOST, "lost 10")));
    assertEquals("failed on attempt 10 (1 of 1 that count): lost 10 (a node went silent; this attempt does not "
        + "count); gave up after 10 attempts that do not count (lost to the cluster or preempted)", done.headline());
  }

  @Test
  void aGangTheClusterHasNoRoomForIsNotRunAgain() {
    Attempts attempts = new Attempts(3, Rerun.ANY_FAILURE, NOT_RERUN);
    assertEquals(new Done(false, "attempt 1 of 3: the gang was not formed within the gang timeout of 5 s: worker 2/3 "
        + "allocated", "failed on attempt 1 of 3: the gang was not formed within the gang timeout of 5 s: worker 2/3 "
        + "allocated"), attempts.after(failed(Kind.NOT_FORMED, "the gang was not formed within the gang timeout of 5 s: "
        + "worker 2/3 allocated")));
  }
}
