package io.muster.launch;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.muster.cluster.HostPort;
import io.muster.cluster.TaskId;
import io.muster.cluster.TaskType;
import io.muster.launch.Attempt.Exit;
import io.muster.launch.Attempt.Failed;
import io.muster.launch.Attempt.Instruction;
import io.muster.launch.Attempt.Kind;
import io.muster.launch.Attempt.Placement;
import io.muster.launch.Attempt.Succeeded;
import io.muster.testing.FakeClock;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import org.junit.jupiter.api.Test;

/** One attempt's life, on a clock that moves only when the test moves it. */
class AttemptTest {

  private static final TaskId CHIEF = new TaskId("chief", 0);
  private static final TaskId WORKER_0 = new TaskId("worker", 0);
  private static final TaskId WORKER_1 = new TaskId("worker", 1);
  private static final TaskId PS_0 = new TaskId("ps", 0);
  private static final TaskId EVALUATOR = new TaskId("evaluator", 0);
  private static final Instruction CONTINUE = new Instruction(Instruction.Action.CONTINUE, "");

  private final FakeClock clock = new FakeClock();

  /** An attempt of {@code gang} whose every member has joined, each on host h{index} in executor {index}. */
  private Attempt formed(GangSpec gang) {
    Attempt attempt = new Attempt(0, gang, Duration.ofMinutes(1), 42, clock);
    for (TaskId task : gang.tasks()) {
      attempt.join(task, HostPort.parse("h" + gang.member(task) + ":1"), placement(gang.member(task)));
    }
    assertTrue(attempt.isFormed());
    return attempt;
  }

  private static Placement placement(int member) {
    return new Placement("h" + member, "executor " + member, Optional.empty());
  }

  private static Exit exit(int code) {
    return Exit.ofCommand(code, List.of(), false);
  }

  /** Moves the clock on by {@code d} in steps of a second, ticking at each, as the launcher's ticker does. */
  private void pass(Attempt attempt, Duration d) {
    for (Duration left = d; !left.isZero(); left = left.minus(min(left, Duration.ofSeconds(1)))) {
      clock.advance(min(left, Duration.ofSeconds(1)));
      attempt.tick();
    }
  }

  /** {@link #pass}, hearing from {@code alive} every second. */
  private void passHearing(Attempt attempt, Duration d, TaskId alive) {
    for (long s = 0; s < d.toSeconds(); s++) {
      pass(attempt, Duration.ofSeconds(1));
      attempt.heard(alive);
    }
  }

  private static Duration min(Duration a, Duration b) {
    return a.compareTo(b) < 0 ? a : b;
  }

  private static Failed failed(Attempt attempt) {
    return (Failed) attempt.outcome().orElseThrow(() -> new AssertionError("the attempt has no outcome yet"));
  }

  @Test
  void workersOnlySucceedWhenEveryWorkerExitsZero() {
    Attempt attempt = formed(GangSpec.workers(2));
    attempt.exited(WORKER_1, exit(0));
    assertEquals(Optional.empty(), attempt.outcome());
    attempt.exited(WORKER_0, exit(0));
    assertEquals(Optional.of(new Succeeded()), attempt.outcome());
  }

  @Test
  void aParameterServerJobEndsWithTheChiefAndTellsTheServingTasksToEnd() {
    Attempt attempt = formed(GangSpec.of(1, 2, 1, 0));
    attempt.exited(CHIEF, exit(0));
    assertEquals(Optional.of(new Succeeded()), attempt.outcome());
    Instruction end = new Instruction(Instruction.Action.END, "the tasks the job awaits have all finished");
    assertEquals(List.of(CONTINUE, end, end, end), List.of(attempt.instruction(CHIEF), attempt.instruction(WORKER_0),
        attempt.instruction(WORKER_1), attempt.instruction(PS_0)));
    attempt.exited(PS_0, exit(143)); // ended by the signal: the verdict stays
    assertEquals(Optional.of(new Succeeded()), attempt.outcome());
    assertEquals(CONTINUE, attempt.instruction(PS_0), "an ended task is not told again");
  }

  @Test
  void anUntrackedTaskThatAlreadyExitedZeroIsNotToldToEnd() {
    Attempt attempt = formed(GangSpec.of(1, 1, 0, 1));
    attempt.exited(EVALUATOR, exit(0));
    attempt.exited(CHIEF, exit(0));
    assertEquals(Optional.empty(), attempt.outcome());
    attempt.exited(WORKER_0, exit(0));
    assertEquals(Optional.of(new Succeeded()), attempt.outcome());
    assertEquals(CONTINUE, attempt.instruction(EVALUATOR));
  }

  @Test
  void aTaskOutsideTheGangIsALaunchersBug() {
    Attempt attempt = formed(GangSpec.workers(2));
    assertThrows(IllegalArgumentException.class, () -> attempt.exited(PS_0, exit(0)));
  }

  @Test
  void anUntrackedTaskThatDiesBeforeTheTrackedOnesAreDoneFailsTheAttempt() {
    Attempt attempt = formed(GangSpec.of(1, 2, 1, 0));
    attempt.exited(PS_0, exit(134));
    attempt.exited(CHIEF, exit(0));
    assertEquals(new Failed(Kind.CLUSTER, "ps 0 on h3 (executor 3) exited with code 134 (killed by signal 6); it "
        + "wrote nothing to stderr", Optional.empty(), List.of(), false), failed(attempt));
  }

  @Test
  void theClustersFailureEndsTheAttemptAtOnceAndEveryMemberIsToldWhy() {
    Attempt attempt = formed(GangSpec.workers(2));
    attempt.exited(WORKER_1, Exit.ofCommand(137, List.of("out of memory"), false));
    String report = "worker 1 on h1 (executor 1) exited with code 137 (killed by signal 9); the last line of its "
        + "stderr:\n  out of memory";
    assertEquals(new Instruction(Instruction.Action.ABORT, report), attempt.instruction(WORKER_0));
    attempt.exited(WORKER_0, exit(1)); // ended by the abort: no cause
    assertEquals(new Failed(Kind.CLUSTER, report, Optional.empty(), List.of(), false), failed(attempt));
  }

  @Test
  void aCommandsOwnFailureWaitsTheCauseWindowThenStands() {
    Attempt attempt = formed(GangSpec.workers(2));
    attempt.exited(WORKER_0, Exit.ofCommand(3, List.of("bad data"), false));
    assertTrue(attempt.failed());
    assertEquals(Optional.empty(), attempt.outcome(), "it may be the symptom of a cluster's failure heard next");
    assertEquals(CONTINUE, attempt.instruction(WORKER_1));
    passHearing(attempt, Rerun.CAUSE_WINDOW.minusSeconds(1), WORKER_1);
    assertEquals(Optional.empty(), attempt.outcome());
    passHearing(attempt, Duration.ofSeconds(1), WORKER_1);
    assertEquals(Kind.OWN, failed(attempt).kind());
    assertEquals("worker 0 on h0 (executor 0) exited with code 3; the last line of its stderr:\n  bad data",
        failed(attempt).report());
  }

  @Test
  void aClustersFailureWithinTheCauseWindowIsTakenForTheCauseOfACommandsOwnFailure() {
    Attempt attempt = formed(GangSpec.workers(2));
    attempt.exited(WORKER_0, exit(1)); // its peer's container was killed a moment before
    pass(attempt, Duration.ofSeconds(2));
    attempt.exited(WORKER_1, exit(137));
    assertEquals(Kind.CLUSTER, failed(attempt).kind());
    assertTrue(failed(attempt).report().startsWith("worker 1 on h1 (executor 1) exited with code 137"));
  }

  @Test
  void aClustersFailureAfterTheCauseWindowReplacesNothing() {
    Attempt attempt = new Attempt(0, GangSpec.workers(2), Duration.ofMinutes(1), 42, clock);
    attempt.join(WORKER_0, HostPort.parse("h0:1"), placement(0));
    attempt.join(WORKER_1, HostPort.parse("h1:1"), placement(1));
    attempt.exited(WORKER_0, exit(1));
    clock.advance(Rerun.CAUSE_WINDOW); // no tick meanwhile: the window is the clock's, not the ticker's
    attempt.exited(WORKER_1, exit(137));
    assertEquals(Kind.OWN, failed(attempt).kind());
  }

  @Test
  void aMemberThatFailedBecauseTheGangDidIsNoCauseAndGivesWayToTheOwnFailureBehindIt() {
    Attempt attempt = formed(GangSpec.of(0, 3, 0, 0));
    attempt.exited(WORKER_0, new Exit(1, true, "failed: CoordinationException: worker 1 aborted the job", List.of()));
    attempt.exited(WORKER_1, new Exit(1, false, "failed: IllegalArgumentException: bad row 7", List.of()));
    TaskId worker2 = new TaskId("worker", 2);
    attempt.exited(worker2, new Exit(75, true, "failed: CollectiveException: worker 1 left", List.of()));
    pass(attempt, Rerun.CAUSE_WINDOW);
    assertEquals(new Failed(Kind.OWN, "worker 1 on h1 (executor 1) failed: IllegalArgumentException: bad row 7",
        Optional.empty(), List.of(), false), failed(attempt));
  }

  @Test
  void aMemberThatFailedBecauseTheGangDidAndNothingElseIsTheClustersFailure() {
    Attempt attempt = formed(GangSpec.workers(2));
    attempt.exited(WORKER_0, new Exit(1, true, "failed: CollectiveException: worker 1 left", List.of()));
    passHearing(attempt, Rerun.CAUSE_WINDOW, WORKER_1);
    assertEquals(Kind.CLUSTER, failed(attempt).kind());
  }

  @Test
  void aMemberSilentForTenSecondsIsLostWithItsHostAndTheAttemptDoesNotCount() {
    Attempt attempt = formed(GangSpec.workers(2));
    for (int s = 0; s < 9; s++) {
      pass(attempt, Duration.ofSeconds(1));
      attempt.heard(WORKER_0);
    }
    assertEquals(Optional.empty(), attempt.outcome());
    pass(attempt, Duration.ofSeconds(1));
    Failed lost = failed(attempt);
    assertEquals(Kind.LOST, lost.kind());
    assertEquals("worker 1 on h1 (executor 1) went silent: no word from it for 10 s", lost.report());
    assertEquals(Optional.of("a member went silent"), lost.lostTo());
    assertEquals(List.of(WORKER_1), lost.silent().stream().map(Attempt.Silent::task).toList());
    assertEquals(Instruction.Action.ABORT, attempt.instruction(WORKER_0).action());
    attempt.explainSilence(Map.of(WORKER_1, "its NodeManager at h1:8041: no answer within 2 s"),
        "; h1 left out of the job's next attempts", "a node went silent");
    assertEquals("worker 1 on h1 (executor 1) went silent: no word from it for 10 s; its NodeManager at h1:8041: no "
        + "answer within 2 s; h1 left out of the job's next attempts", failed(attempt).report());
    assertEquals(Optional.of("a node went silent"), failed(attempt).lostTo());
  }

  @Test
  void aMemberSilentForThreeSecondsWhenAnotherFailsIsTakenForTheCause() {
    Attempt attempt = formed(GangSpec.workers(2));
    pass(attempt, Duration.ofSeconds(2));
    attempt.heard(WORKER_0);
    attempt.exited(WORKER_0, Exit.ofCommand(1, List.of("lost my peer"), false));
    assertEquals(Optional.empty(), attempt.outcome(), "silent for 2 s only");
    pass(attempt, Duration.ofSeconds(1));
    assertEquals(new Failed(Kind.LOST, "worker 1 on h1 (executor 1) went silent: no word from it for 3 s; after it, "
        + "worker 0 on h0 (executor 0) exited with code 1; the last line of its stderr:\n  lost my peer",
        Optional.of("a member went silent"), failed(attempt).silent(), false), failed(attempt));
  }

  @Test
  void aLauncherThatDidNotRunForSecondsDoesNotJudgeTheSilenceItSleptThrough() {
    Attempt attempt = formed(GangSpec.workers(2));
    clock.advance(Duration.ofSeconds(20)); // a long pause of the launcher's JVM
    attempt.tick();
    assertEquals(Optional.empty(), attempt.outcome());
    pass(attempt, Duration.ofSeconds(10));
    assertEquals(Kind.LOST, failed(attempt).kind());
  }

  @Test
  void aMemberWhoseLinkEndsBeforeItsExitFailedAndTheClusterCanSayItTookItAway() {
    Attempt attempt = formed(GangSpec.workers(2));
    attempt.linkLost(WORKER_1);
    assertEquals(new Failed(Kind.CLUSTER, "worker 1 on h1 (executor 1) ended before it reported its exit (its process "
        + "failed or was killed)", Optional.empty(), List.of(), false), failed(attempt));
    attempt.gone(WORKER_1, -102, "preempted", true);
    assertEquals(Kind.LOST, failed(attempt).kind());
    assertEquals(Optional.of("the cluster took its container away"), failed(attempt).lostTo());
  }

  @Test
  void aContainerTheClusterTookAwayIsLostAndTheReportQuotesTheCluster() {
    Attempt attempt = new Attempt(0, GangSpec.workers(2), Duration.ofMinutes(1), 42, clock);
    assertEquals(Optional.of(WORKER_0), attempt.assign(TaskType.WORKER, new Placement("h1", "container c1",
        Optional.empty())));
    assertEquals(Optional.of(WORKER_1), attempt.assign(TaskType.WORKER, new Placement("h2", "container c2",
        Optional.empty())));
    assertEquals(Optional.empty(), attempt.assign(TaskType.WORKER, new Placement("h3", "container c3",
        Optional.empty())), "a surplus container");
    attempt.gone(WORKER_1, -102, "preempted by the scheduler", true);
    assertEquals(new Failed(Kind.LOST, "worker 1 on h2 (container c2) exited with code -102; the last line of its "
        + "stderr:\n  the container ended (exit status -102): preempted by the scheduler",
        Optional.of("the cluster took its container away"), List.of(), false), failed(attempt));
  }

  @Test
  void aPreemptionNoticeIsToldUntilTheMembersLeaveAndTheReportSaysWhoSaved() {
    Attempt attempt = formed(GangSpec.workers(2));
    String notice = "preemption notice for worker 1 (container c2 on h2)";
    assertEquals(Optional.of(notice), attempt.notice(Map.of(WORKER_1, "container c2 on h2")));
    assertEquals(Optional.empty(), attempt.notice(Map.of(WORKER_0, "again")), "one notice an attempt");
    assertEquals(new Instruction(Instruction.Action.PREEMPT, notice), attempt.instruction(WORKER_0));
    attempt.exited(WORKER_1, Exit.ofCommand(42, List.of("saved after step 7 of epoch 2"), false));
    passHearing(attempt, OnPreemption.SAVED_PEERS_WAIT.minusSeconds(1), WORKER_0);
    assertEquals(Optional.empty(), attempt.outcome(), "worker 0 is given time to save and exit by itself");
    passHearing(attempt, Duration.ofSeconds(1), WORKER_0);
    assertEquals(new Instruction(Instruction.Action.ABORT, notice + "; worker 1 exited with code 42 (saved); the "
        + "attempt ends"), attempt.instruction(WORKER_0));
    assertEquals(new Failed(Kind.PREEMPTED, notice + "; saved by worker 1; not saved by worker 0 (still running): the "
        + "next attempt resumes from the last backup", Optional.of("preempted"), List.of(), false), failed(attempt));
    attempt.exited(WORKER_0, exit(42));
    assertEquals(new Failed(Kind.PREEMPTED, notice + "; every task saved (exit code 42)", Optional.of("preempted"),
        List.of(), true), failed(attempt));
  }

  @Test
  void afterANoticeAMemberThatFailsOtherwiseEndsThePreemptedAttemptAtOnce() {
    Attempt attempt = formed(GangSpec.workers(2));
    attempt.notice(Map.of(WORKER_0, "SIGPWR: decommissioning"));
    attempt.exited(WORKER_0, exit(42));
    attempt.exited(WORKER_1, Exit.ofCommand(1, List.of("Traceback", "KeyError"), false));
    assertEquals(new Failed(Kind.PREEMPTED, "preemption notice for worker 0 (SIGPWR: decommissioning); saved by "
        + "worker 0; not saved by worker 1 (exited with code 1; the last 2 lines of its stderr: | Traceback | KeyError): "
        + "the next attempt resumes from the last backup", Optional.of("preempted"), List.of(), false),
        failed(attempt));
  }

  @Test
  void aNoticeBeforeTheGangFormedEndsTheAttemptUncounted() {
    Attempt attempt = new Attempt(0, GangSpec.workers(2), Duration.ofMinutes(1), 42, clock);
    attempt.join(WORKER_0, HostPort.parse("h0:1"), placement(0));
    attempt.notice(Map.of(WORKER_0, "SIGTERM: the executor is shutting down"));
    assertEquals(new Failed(Kind.PREEMPTED, "preemption notice for worker 0 (SIGTERM: the executor is shutting down) "
        + "before the gang formed; ending the attempt", Optional.of("preempted"), List.of(), true), failed(attempt));
  }

  @Test
  void aNoticeAfterAFailureChangesNothing() {
    Attempt attempt = formed(GangSpec.workers(2));
    attempt.exited(WORKER_0, exit(3));
    attempt.notice(Map.of(WORKER_1, "SIGPWR"));
    assertEquals(CONTINUE, attempt.instruction(WORKER_1));
    passHearing(attempt, Rerun.CAUSE_WINDOW, WORKER_1);
    assertEquals(Kind.OWN, failed(attempt).kind());
  }

  @Test
  void aGangNotFormedByItsDeadlineIsOverdueForTheLauncherToExplain() {
    Attempt attempt = new Attempt(0, GangSpec.workers(2), Duration.ofSeconds(5), 42, clock);
    attempt.join(WORKER_0, HostPort.parse("h0:1"), placement(0));
    pass(attempt, Duration.ofSeconds(4));
    assertFalse(attempt.formationOverdue());
    pass(attempt, Duration.ofSeconds(1));
    assertTrue(attempt.formationOverdue());
    assertEquals(List.of(WORKER_1), attempt.missing());
    attempt.notFormed("missing: worker 1 (its executor answers no connection)", true);
    assertEquals(new Failed(Kind.CLUSTER, "the gang was not formed within the gang timeout of 5 s: missing: worker 1 "
        + "(its executor answers no connection)", Optional.empty(), List.of(), false), failed(attempt));
    assertEquals(Instruction.Action.ABORT, attempt.instruction(WORKER_0).action());
  }

  @Test
  void theLauncherSettlesAWaitingFailureOrFailsTheAttemptForItsOwnReason() {
    Attempt waiting = formed(GangSpec.workers(2));
    waiting.exited(WORKER_0, exit(3));
    waiting.settle("the job failed");
    assertEquals(Kind.OWN, failed(waiting).kind());
    Attempt silent = formed(GangSpec.workers(2));
    silent.settle("Spark aborted the job: executor 3 lost");
    assertEquals(new Failed(Kind.CLUSTER, "Spark aborted the job: executor 3 lost", Optional.empty(), List.of(),
        false), failed(silent));
  }

  @Test
  void aMemberMustJoinFromItsPlaceOnceAndBeOfTheGang() {
    Attempt attempt = new Attempt(2, GangSpec.workers(2), Duration.ofMinutes(1), 42, clock);
    attempt.assign(TaskType.WORKER, new Placement("h1", "container c1", Optional.empty()));
    assertEquals("worker 0 from container c9 is not attempt 3's: it runs in container c1",
        assertThrows(IllegalStateException.class, () -> attempt.join(WORKER_0, HostPort.parse("h1:1"),
            new Placement("h1", "container c9", Optional.empty()))).getMessage());
    attempt.join(WORKER_0, HostPort.parse("h1:1"), new Placement("h1", "container c1", Optional.empty()));
    assertEquals("worker 0 has already joined attempt 3", assertThrows(IllegalStateException.class,
        () -> attempt.join(WORKER_0, HostPort.parse("h1:2"), new Placement("h1", "container c1", Optional.empty())))
        .getMessage());
    assertThrows(IllegalArgumentException.class, () -> attempt.join(EVALUATOR, HostPort.parse("h1:3"), placement(9)));
  }

  @Test
  void theGangsAddressesComeOutInMemberOrderOnceEveryoneJoined() {
    Attempt attempt = new Attempt(0, GangSpec.of(1, 1, 0, 0), Duration.ofMinutes(1), 42, clock);
    attempt.join(WORKER_0, HostPort.parse("w:2"), placement(1));
    assertEquals(Optional.empty(), attempt.addresses());
    attempt.join(CHIEF, HostPort.parse("c:1"), placement(0));
    assertEquals(Optional.of(List.of(HostPort.parse("c:1"), HostPort.parse("w:2"))), attempt.addresses());
  }
}
