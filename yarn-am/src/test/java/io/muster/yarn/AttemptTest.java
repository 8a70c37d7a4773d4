package io.muster.yarn;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.muster.cluster.HostPort;
import io.muster.cluster.TaskId;
import io.muster.cluster.TaskType;
import io.muster.launch.EndOfJob;
import io.muster.launch.GangSpec;
import io.muster.launch.Rerun;
import java.time.Duration;
import java.util.List;
import java.util.Optional;
import org.apache.hadoop.yarn.api.records.ContainerExitStatus;
import org.junit.jupiter.api.Test;

/** The master's account of one attempt: numbering, exits, and what YARN took away. */
class AttemptTest {

  private static Attempt twoWorkers() {
    Attempt attempt = new Attempt(0, GangSpec.workers(2), Duration.ofMinutes(1), 42);
    assertEquals(Optional.of(new TaskId("worker", 0)), attempt.assign(TaskType.WORKER, "c1", "h1", "l1"));
    assertEquals(Optional.of(new TaskId("worker", 1)), attempt.assign(TaskType.WORKER, "c2", "h2", "l2"));
    assertEquals(Optional.empty(), attempt.assign(TaskType.WORKER, "c3", "h3", "l3"), "a surplus container");
    return attempt;
  }

  @Test
  void aPreemptedContainerFailsTheAttemptWithoutCountingAgainstIt() {
    Attempt attempt = twoWorkers();
    attempt.containerCompleted("c2", ContainerExitStatus.PREEMPTED, "preempted by the scheduler");
    assertEquals(new EndOfJob.Failed(new TaskId("worker", 1), ContainerExitStatus.PREEMPTED), attempt.verdict());
    assertEquals(Optional.of("YARN took the container away"), attempt.lostToCluster());
    assertEquals("worker 1 on h2 (container c2) exited with code -102; the last line of its stderr:\n"
        + "  the container ended (YARN exit status -102): preempted by the scheduler", attempt.failureReport());
  }

  @Test
  void aPreemptionNoticeIsDeliveredUntilACommandExitsThenTheAttemptEndsUncountedSayingWhoSaved() {
    Attempt attempt = twoWorkers();
    TaskId worker0 = new TaskId("worker", 0);
    TaskId worker1 = new TaskId("worker", 1);
    attempt.register(worker0, HostPort.parse("h1:1"));
    attempt.register(worker1, HostPort.parse("h2:1"));
    assertEquals(Optional.empty(), attempt.preemptionAnnounced(List.of("another-apps-container")));
    String notice = "preemption notice for worker 1 (container c2 on h2)";
    assertEquals(Optional.of(notice), attempt.preemptionAnnounced(List.of("c2", "c9")));
    assertEquals(Optional.empty(), attempt.preemptionAnnounced(List.of("c2")), "one notice an attempt");
    assertEquals(Optional.of(notice), attempt.preemptionToDeliver());

    attempt.exited(worker1, 42, List.of("saved after step 7 of epoch 2"));
    assertEquals(Optional.empty(), attempt.failureToActOn(), "worker 0 is given time to save and exit by itself");
    attempt.abortForFailure(); // what the master does once that time is up
    assertEquals(Optional.empty(), attempt.preemptionToDeliver(), "the attempt is over: ABORT, not PREEMPT");
    assertEquals(Optional.of(notice + "; worker 1 exited with code 42 (saved); the attempt ends"),
        attempt.abortReason());
    assertEquals(notice + "; saved by worker 1; not saved by worker 0 (still running): the next attempt resumes from "
        + "the last backup", attempt.failureReport());
    attempt.exited(worker0, 42, List.of(), true);
    assertTrue(attempt.preempted());
    assertFalse(attempt.endedByOwnFailure());
    assertEquals(Optional.of("YARN preempted it"), attempt.lostToCluster(), "it does not count");
    assertTrue(attempt.savedForPreemption());
    assertEquals(notice + "; every task saved (exit code 42)", attempt.failureReport());
  }

  @Test
  void aTaskThatIgnoresTheNoticeIsKilledByYarnAndTheReportSaysItDidNotSave() {
    Attempt attempt = twoWorkers();
    attempt.register(new TaskId("worker", 0), HostPort.parse("h1:1"));
    attempt.register(new TaskId("worker", 1), HostPort.parse("h2:1"));
    attempt.preemptionAnnounced(List.of("c1"));
    attempt.containerCompleted("c1", ContainerExitStatus.PREEMPTED, "Container preempted by scheduler");
    assertEquals(Optional.of(new EndOfJob.Failed(new TaskId("worker", 0), ContainerExitStatus.PREEMPTED)),
        attempt.failureToActOn(), "not a save: the attempt ends at once");
    attempt.abortForFailure();
    attempt.exited(new TaskId("worker", 1), 42, List.of());
    assertTrue(attempt.preempted());
    assertFalse(attempt.savedForPreemption());
    assertEquals("preemption notice for worker 0 (container c1 on h1); saved by worker 1; not saved by worker 0 "
        + "(exited with code -102; the last line of its stderr: | the container ended (YARN exit status -102): "
        + "Container preempted by scheduler): the next attempt resumes from the last backup", attempt.failureReport());
  }

  @Test
  void aNoticeBeforeTheGangFormsEndsTheAttemptAtOnceUncounted() {
    Attempt attempt = twoWorkers();
    attempt.register(new TaskId("worker", 0), HostPort.parse("h1:1"));
    attempt.preemptionAnnounced(List.of("c1"));
    assertEquals(Optional.of("preemption notice for worker 0 (container c1 on h1) before the gang formed; ending "
        + "the attempt"), attempt.abortReason());
    assertEquals(Optional.empty(), attempt.preemptionToDeliver(), "no command runs yet: nothing to tell");
    assertTrue(attempt.preempted());
    assertTrue(attempt.savedForPreemption(), "no command ran: nothing was lost");
    assertFalse(attempt.endedByOwnFailure());
    assertEquals(attempt.abortReason().get(), attempt.failureReport());
  }

  @Test
  void aCommandThatFailsCountsAndTheContainersEndAfterwardsDoNotChangeIt() {
    Attempt attempt = twoWorkers();
    attempt.exited(new TaskId("worker", 0), 2, List.of("Traceback", "ValueError: bad input"));
    attempt.abortForFailure(); // what the master does once the cause window has passed
    assertTrue(attempt.endedByOwnFailure());
    attempt.containerCompleted("c1", 1, "");
    attempt.containerCompleted("c2", ContainerExitStatus.ABORTED, "released by the master");
    assertEquals(Optional.empty(), attempt.lostToCluster(), "the failure was the command's; the release came after it");
    assertEquals(new EndOfJob.Failed(new TaskId("worker", 0), 2), attempt.verdict());
    assertTrue(attempt.allContainersDone());
  }

  @Test
  void aCommandsOwnFailureWaitsForItsCauseAndAContainerPreemptedMeanwhileIsIt() {
    Attempt attempt = twoWorkers();
    attempt.exited(new TaskId("worker", 0), 1, List.of("lost my peer"));
    assertEquals(Optional.empty(), attempt.failureToActOn(), "within " + Rerun.CAUSE_WINDOW + " of a command's own failure");
    attempt.containerCompleted("c2", ContainerExitStatus.PREEMPTED, "preempted by the scheduler");
    EndOfJob.Failed cause = new EndOfJob.Failed(new TaskId("worker", 1), ContainerExitStatus.PREEMPTED);
    assertEquals(Optional.of(cause), attempt.failureToActOn(), "the cluster's failure is acted on at once");
    attempt.abortForFailure();
    assertEquals(Optional.of("YARN took the container away"), attempt.lostToCluster());
    assertFalse(attempt.endedByOwnFailure());
    assertTrue(attempt.failureReport().startsWith("worker 1 on h2 (container c2) exited with code -102"),
        attempt.failureReport());
  }

  @Test
  void anExecutorIsSilentOnlyWhileItsCommandRunsInAFormedGang() throws Exception {
    Attempt attempt = twoWorkers();
    TaskId worker0 = new TaskId("worker", 0);
    TaskId worker1 = new TaskId("worker", 1);
    Duration limit = Duration.ofMillis(500);
    attempt.register(worker0, HostPort.parse("h1:1"));
    Thread.sleep(600);
    assertEquals(List.of(), attempt.silentFor(limit), "worker 0 waits for the gang, which is no heartbeat");
    attempt.register(worker1, HostPort.parse("h2:1"));
    Thread.sleep(600);
    attempt.heard(worker0);
    assertEquals(List.of(worker1), attempt.silentFor(limit).stream().map(Attempt.Silent::task).toList());
    attempt.exited(worker1, 0, List.of());
    assertEquals(List.of(), attempt.silentFor(limit), "worker 1 has exited; worker 0 was heard from");
  }

  @Test
  void anAttemptAbortedForTheClusterSaysWhyAndAnAbortBeforeItKeepsItsVerdict() {
    Attempt lost = twoWorkers();
    lost.abortLostToCluster("worker 1 went silent", "its node went silent");
    assertEquals(Optional.of("its node went silent"), lost.lostToCluster());
    assertEquals("worker 1 went silent", lost.failureReport());

    Attempt failed = twoWorkers();
    failed.abort("worker 0 exited with code 2");
    failed.abortLostToCluster("worker 1 went silent", "its node went silent");
    assertEquals(Optional.empty(), failed.lostToCluster(), "the first abort is the attempt's account");
    assertEquals("worker 0 exited with code 2", failed.failureReport());
  }

  @Test
  void aContainerReleasedAfterTheAttemptWasAbortedIsNotTheClustersFailure() {
    Attempt attempt = twoWorkers();
    attempt.abort("the gang was not formed within the gang timeout");
    attempt.containerCompleted("c2", ContainerExitStatus.ABORTED, "released by the master");
    assertEquals(Optional.empty(), attempt.lostToCluster(), "the master released it: the abort is the account");
  }

  /** The submitter's progress line gives a count before the task type, so it never reads as a task's index. */
  @Test
  void aProgressCountComesBeforeItsTaskType() {
    assertEquals("1 worker", MusterClient.tasks("worker", 1));
    assertEquals("3 workers", MusterClient.tasks("worker", 3));
    assertEquals("1 chief", MusterClient.tasks("chief", 1));
    assertEquals("2 ps", MusterClient.tasks("ps", 2));
    assertEquals("2 evaluators", MusterClient.tasks("evaluator", 2));
  }
}
