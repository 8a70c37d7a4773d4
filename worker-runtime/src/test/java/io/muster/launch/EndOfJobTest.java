package io.muster.launch;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.muster.cluster.TaskId;
import io.muster.launch.EndOfJob.Failed;
import io.muster.launch.EndOfJob.Running;
import io.muster.launch.EndOfJob.Succeeded;
import java.util.List;
import org.junit.jupiter.api.Test;

class EndOfJobTest {

  private static final TaskId CHIEF = new TaskId("chief", 0);
  private static final TaskId WORKER_0 = new TaskId("worker", 0);
  private static final TaskId WORKER_1 = new TaskId("worker", 1);
  private static final TaskId PS_0 = new TaskId("ps", 0);
  private static final TaskId EVALUATOR = new TaskId("evaluator", 0);

  @Test
  void workersOnlySucceedWhenEveryWorkerExitsZero() {
    EndOfJob end = new EndOfJob(GangSpec.workers(2));
    assertEquals(new Running(), end.exited(WORKER_1, 0));
    assertEquals(new Succeeded(List.of()), end.exited(WORKER_0, 0));
  }

  @Test
  void parameterServerJobEndsWithTheChiefAndEndsTheServingTasks() {
    EndOfJob end = new EndOfJob(GangSpec.of(1, 2, 1, 0));
    assertEquals(new Succeeded(List.of(WORKER_0, WORKER_1, PS_0)), end.exited(CHIEF, 0));
    // the tasks the launcher then ends exit by a signal: the verdict stays
    assertEquals(new Succeeded(List.of(WORKER_0, WORKER_1, PS_0)), end.exited(PS_0, 143));
  }

  @Test
  void anUntrackedTaskThatAlreadyExitedZeroIsNotEndedAgain() {
    EndOfJob end = new EndOfJob(GangSpec.of(1, 1, 0, 1));
    assertEquals(new Running(), end.exited(EVALUATOR, 0));
    assertEquals(new Running(), end.exited(CHIEF, 0));
    assertEquals(new Succeeded(List.of()), end.exited(WORKER_0, 0));
  }

  @Test
  void theFirstFailureIsTheVerdictWhateverExitsAfterItOnceSettled() {
    EndOfJob end = new EndOfJob(GangSpec.of(1, 2, 1, 0));
    assertEquals(new Failed(CHIEF, 1), end.exited(CHIEF, 1));
    assertEquals(new Failed(CHIEF, 1), end.settle());
    assertEquals(new Failed(CHIEF, 1), end.exited(PS_0, 137));
    assertEquals(new Failed(CHIEF, 1), end.verdict());
  }

  @Test
  void aClustersFailureBeforeTheVerdictIsSettledIsTakenForTheCauseOfACommandsOwnFailure() {
    EndOfJob end = new EndOfJob(GangSpec.workers(2));
    Failed symptom = (Failed) end.exited(WORKER_0, 1); // its peer's container was killed a moment before
    assertTrue(symptom.isCommandsOwn());
    Failed cause = (Failed) end.exited(WORKER_1, 137);
    assertEquals(new Failed(WORKER_1, 137), cause);
    assertFalse(cause.isCommandsOwn());
    assertEquals(cause, end.settle());
  }

  @Test
  void aCommandsOwnFailureAfterAnotherStaysTheFirstAndAClustersFailureIsNotReplaced() {
    EndOfJob own = new EndOfJob(GangSpec.of(0, 3, 0, 0));
    own.exited(WORKER_0, 3);
    assertEquals(new Failed(WORKER_0, 3), own.exited(WORKER_1, 1));
    EndOfJob clusters = new EndOfJob(GangSpec.workers(2));
    clusters.exited(WORKER_1, -102); // YARN preempted its container
    assertEquals(new Failed(WORKER_1, -102), clusters.exited(WORKER_0, 143));
  }

  @Test
  void anExitCodeIsTheCommandsOwnFromOneTo128ButNotTheRequestForARerun() {
    for (int own : new int[] {1, 2, 3, 74, 76, 127, 128}) {
      assertTrue(Rerun.isCommandsOwn(own), "exit " + own);
    }
    for (int clusters : new int[] {Rerun.EX_TEMPFAIL, 129, 137, 143, -100, -102}) {
      assertFalse(Rerun.isCommandsOwn(clusters), "exit " + clusters);
    }
    assertFalse(Rerun.CLUSTER_FAILURES.reruns(new Failed(WORKER_0, 3)));
    assertTrue(Rerun.CLUSTER_FAILURES.reruns(new Failed(WORKER_0, 75)));
    assertTrue(Rerun.ANY_FAILURE.reruns(new Failed(WORKER_0, 3)));
  }

  @Test
  void theRerunOptionNamesItsValues() {
    assertEquals(Rerun.ANY_FAILURE, Rerun.parse("--rerun", "any-failure"));
    assertEquals(Rerun.CLUSTER_FAILURES, Rerun.parse("--rerun", "cluster-failures"));
    assertEquals("--rerun must be one of cluster-failures, any-failure, was 'always'",
        assertThrows(IllegalArgumentException.class, () -> Rerun.parse("--rerun", "always")).getMessage());
  }

  @Test
  void anUntrackedTaskThatDiesBeforeTheTrackedOnesAreDoneFailsTheJob() {
    EndOfJob end = new EndOfJob(GangSpec.of(1, 2, 1, 0));
    assertEquals(new Failed(PS_0, 134), end.exited(PS_0, 134));
    assertEquals(new Failed(PS_0, 134), end.exited(CHIEF, 0));
  }

  @Test
  void aTaskOutsideTheGangOrReportedTwiceIsALaunchersBug() {
    EndOfJob end = new EndOfJob(GangSpec.workers(2));
    assertThrows(IllegalArgumentException.class, () -> end.exited(PS_0, 0));
    end.exited(WORKER_0, 0);
    assertEquals("worker 0 was reported to exit twice",
        assertThrows(IllegalStateException.class, () -> end.exited(WORKER_0, 0)).getMessage());
  }
}
