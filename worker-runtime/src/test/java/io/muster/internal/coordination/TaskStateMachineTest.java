package io.muster.internal.coordination;

import io.muster.coordination.TaskState;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.grpc.Status;
import io.muster.cluster.TaskId;
import io.muster.internal.coordination.TaskStateMachine.Heartbeat;
import io.muster.internal.coordination.TaskStateMachine.Registration;
import java.time.Duration;
import org.junit.jupiter.api.Test;

/** The coordination service's task state transitions, one literal case each. */
class TaskStateMachineTest {
  private static final Duration TIMEOUT = Duration.ofSeconds(10);
  private static final long SECOND = 1_000_000_000L;

  private static TaskStateMachine task() {
    return new TaskStateMachine(new TaskId("worker", 1), "/job:worker/replica:0/task:1 (h:2)", false);
  }

  private static TaskStateMachine recoverable(long incarnation) {
    TaskStateMachine task = new TaskStateMachine(new TaskId("worker", 1), "/job:worker/replica:0/task:1 (h:2)", true);
    task.register(incarnation, 0);
    return task;
  }

  private static TaskStateMachine connected(long incarnation) {
    TaskStateMachine task = task();
    task.register(incarnation, 0);
    return task;
  }

  private static TaskStateMachine inError() {
    TaskStateMachine task = connected(7);
    task.errorReported(Status.Code.INTERNAL, "out of memory");
    return task;
  }

  @Test
  void aNewTaskIsDisconnectedWithoutError() {
    TaskStateMachine task = task();
    assertEquals(TaskState.DISCONNECTED, task.state());
    assertNull(task.error());
  }

  @Test
  void registeringConnectsADisconnectedTaskWithItsIncarnation() {
    TaskStateMachine task = task();
    assertEquals(Registration.CONNECTED, task.register(7, 0));
    assertEquals(TaskState.CONNECTED, task.state());
    assertEquals(7, task.incarnation());
  }

  @Test
  void registeringAgainWithTheSameIncarnationChangesNothing() {
    TaskStateMachine task = connected(7);
    assertEquals(Registration.ALREADY_CONNECTED, task.register(7, 5 * SECOND));
    assertEquals(TaskState.CONNECTED, task.state());
    assertTrue(task.heartbeatOverdue(11 * SECOND, TIMEOUT), "the second registration is not a heartbeat");
  }

  @Test
  void registeringWithAnotherIncarnationWhileConnectedIsARestartAndAnError() {
    TaskStateMachine task = connected(7);
    assertEquals(Registration.RESTARTED, task.register(8, 0));
    assertEquals(TaskState.ERROR, task.state());
    assertEquals(Status.Code.ABORTED, task.error().getStatus().getCode());
    assertEquals("/job:worker/replica:0/task:1 (h:2) unexpectedly tried to connect with a different incarnation. "
        + "It has likely restarted.", task.error().getStatus().getDescription());
    assertEquals(7, task.incarnation());
  }

  @Test
  void aTaskInErrorMayNotRegister() {
    TaskStateMachine task = inError();
    assertEquals(Registration.REFUSED_IN_ERROR, task.register(7, 0));
    assertEquals(TaskState.ERROR, task.state());
    assertEquals("out of memory", task.error().getStatus().getDescription());
  }

  @Test
  void aHeartbeatFromTheRegisteredIncarnationIsAccepted() {
    TaskStateMachine task = connected(7);
    assertEquals(Heartbeat.ACCEPTED, task.heartbeat(7, 9 * SECOND));
    assertFalse(task.heartbeatOverdue(18 * SECOND, TIMEOUT));
    assertTrue(task.heartbeatOverdue(20 * SECOND, TIMEOUT));
  }

  @Test
  void aHeartbeatBeforeRegisteringIsRefused() {
    TaskStateMachine task = task();
    assertEquals(Heartbeat.REFUSED_NOT_CONNECTED, task.heartbeat(7, 0));
    assertEquals(TaskState.DISCONNECTED, task.state());
  }

  @Test
  void aHeartbeatFromAnotherIncarnationIsARestartAndAnError() {
    TaskStateMachine task = connected(7);
    assertEquals(Heartbeat.RESTARTED, task.heartbeat(8, 0));
    assertEquals(TaskState.ERROR, task.state());
    assertEquals("/job:worker/replica:0/task:1 (h:2) Heartbeat: Incarnation ID mismatch: expecting 7 but got 8. "
        + "The task has restarted.", task.error().getStatus().getDescription());
  }

  @Test
  void aHeartbeatFromATaskInErrorIsRefused() {
    TaskStateMachine task = inError();
    assertEquals(Heartbeat.REFUSED_IN_ERROR, task.heartbeat(7, 0));
    assertEquals(TaskState.ERROR, task.state());
  }

  @Test
  void onlyAConnectedTasksHeartbeatsAreOverdue() {
    assertFalse(task().heartbeatOverdue(100 * SECOND, TIMEOUT));
    assertFalse(inError().heartbeatOverdue(100 * SECOND, TIMEOUT));
    assertTrue(connected(7).heartbeatOverdue(100 * SECOND, TIMEOUT));
    assertFalse(connected(7).heartbeatOverdue(10 * SECOND, TIMEOUT), "exactly the timeout is not overdue");
  }

  @Test
  void aHeartbeatTimeoutPutsAConnectedTaskInErrorAsUnavailable() {
    TaskStateMachine task = connected(7);
    task.heartbeatTimedOut();
    assertEquals(TaskState.ERROR, task.state());
    assertEquals(Status.Code.UNAVAILABLE, task.error().getStatus().getCode());
    assertTrue(task.error().getStatus().getDescription()
        .startsWith("Task /job:worker/replica:0/task:1 (h:2) heartbeat timeout."), task.error().getStatus().toString());
  }

  @Test
  void aReportedErrorPutsATaskInErrorFromAnyState() {
    for (TaskStateMachine task : new TaskStateMachine[] {task(), connected(7), inError()}) {
      task.errorReported(Status.Code.CANCELLED, "stopped by the user");
      assertEquals(TaskState.ERROR, task.state());
      assertEquals(Status.Code.CANCELLED, task.error().getStatus().getCode());
      assertEquals("stopped by the user", task.error().getStatus().getDescription());
    }
  }

  @Test
  void shutdownDisconnectsAConnectedTask() {
    TaskStateMachine task = connected(7);
    assertTrue(task.shutDown());
    assertEquals(TaskState.DISCONNECTED, task.state());
    assertEquals(Heartbeat.REFUSED_NOT_CONNECTED, task.heartbeat(7, 0));
  }

  @Test
  void shutdownLeavesATaskInErrorInError() {
    TaskStateMachine task = inError();
    assertFalse(task.shutDown());
    assertEquals(TaskState.ERROR, task.state());
  }

  @Test
  void resetDisconnectsATaskInErrorWhichMayThenRegisterAgain() {
    TaskStateMachine task = inError();
    assertTrue(task.reset());
    assertEquals(TaskState.DISCONNECTED, task.state());
    assertNull(task.error());
    assertEquals(Registration.CONNECTED, task.register(8, 0));
    assertEquals(8, task.incarnation());
  }

  @Test
  void resetIsRefusedForATaskNotInError() {
    TaskStateMachine disconnected = task();
    TaskStateMachine connected = connected(7);
    assertFalse(disconnected.reset());
    assertFalse(connected.reset());
    assertEquals(TaskState.DISCONNECTED, disconnected.state());
    assertEquals(TaskState.CONNECTED, connected.state());
  }

  @Test
  void aRecoverableTaskRegisteringWithANewIncarnationReconnectsWithoutError() {
    TaskStateMachine task = recoverable(7);
    assertEquals(Registration.CONNECTED, task.register(8, SECOND));
    assertEquals(TaskState.CONNECTED, task.state());
    assertEquals(8, task.incarnation());
    assertNull(task.error());
  }

  @Test
  void aRecoverableTaskInErrorComesBackWithANewIncarnationButNotWithTheOldOne() {
    TaskStateMachine task = recoverable(7);
    task.heartbeatTimedOut();
    assertEquals(Registration.REFUSED_IN_ERROR, task.register(7, SECOND));
    assertEquals(TaskState.ERROR, task.state());
    assertEquals(Registration.CONNECTED, task.register(9, 2 * SECOND));
    assertEquals(TaskState.CONNECTED, task.state());
    assertFalse(task.heartbeatOverdue(2 * SECOND, TIMEOUT));
  }

  @Test
  void aHeartbeatFromAnOldIncarnationOfARecoverableTaskIsRefusedWithoutFailingIt() {
    TaskStateMachine task = recoverable(7);
    task.register(8, SECOND);
    assertEquals(Heartbeat.REFUSED_NOT_CONNECTED, task.heartbeat(7, 2 * SECOND));
    assertEquals(TaskState.CONNECTED, task.state());
    assertEquals(Heartbeat.ACCEPTED, task.heartbeat(8, 2 * SECOND));
  }
}
