package io.muster.internal.coordination;

import io.muster.coordination.CoordinationException;
import io.muster.coordination.CoordinationOptions;
import io.muster.coordination.TaskState;
import io.muster.coordination.TaskStatus;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.grpc.Status;
import io.muster.cluster.TaskId;
import io.muster.rpc.DeadlineExceededException;
import io.muster.testing.Eventually;
import io.muster.testing.LocalCluster;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/** The coordination service and its agents over real gRPC on 127.0.0.1, tasks in this JVM. */
class CoordinationServiceTest {

  static final CoordinationOptions FAST = CoordinationOptions.DEFAULTS
      .withHeartbeatTimeout(Duration.ofSeconds(2))
      .withJoinTimeout(Duration.ofSeconds(20))
      .withProgressInterval(Duration.ofSeconds(1));

  private static final TaskId W0 = new TaskId("worker", 0);
  private static final TaskId W1 = new TaskId("worker", 1);
  private static final TaskId W2 = new TaskId("worker", 2);
  private static final TaskId W3 = new TaskId("worker", 3);

  /** Blocking calls run here, one thread each: the common pool may have fewer threads than a test has callers. */
  private final ExecutorService callers = Executors.newCachedThreadPool();

  @AfterEach
  void stopCallers() {
    callers.shutdownNow();
  }

  private static CoordinationService serviceOf(LocalCluster cluster) {
    return cluster.worker(0).service().orElseThrow();
  }

  @Test
  void everyTaskJoinsAndSeesEveryOtherConnected() throws Exception {
    try (LocalCluster cluster = LocalCluster.workers(4, FAST)) {
      cluster.joinAll();
      List<TaskStatus> states = cluster.worker(2).agent().taskStates();
      assertEquals(List.of(W0, W1, W2, W3), states.stream().map(TaskStatus::task).toList());
      assertTrue(states.stream().allMatch(s -> s.state() == TaskState.CONNECTED), states.toString());
      assertEquals(TaskState.CONNECTED, cluster.worker(3).agent().state());
    }
  }

  @Test
  void aTaskThatNeverStartsIsNamedWithWhyItIsMissing() throws Exception {
    CoordinationOptions shortJoin = FAST.withJoinTimeout(Duration.ofSeconds(3));
    try (LocalCluster cluster = LocalCluster.workers(4, shortJoin)) {
      // Worker 3 never comes: its runtime is stopped, and its port points at nothing.
      cluster.stop(W3);
      var failure = assertThrows(java.util.concurrent.ExecutionException.class, () -> cluster.join(List.of(W0, W1, W2)));
      assertTrue(failure.getCause() instanceof DeadlineExceededException, failure.getCause().toString());
      String message = failure.getCause().getMessage();
      String w3 = cluster.cluster().taskAddress(W3);
      assertTrue(message.contains("1 of 4 tasks missing: worker 3 at " + w3 + ": connection refused"), message);
      assertTrue(message.contains("timed out after 3 s waiting for all tasks"), message);
    }
  }

  @Test
  void aRestartedTaskIsRecognisedAndEveryoneIsTold() throws Exception {
    try (LocalCluster cluster = LocalCluster.workers(3, FAST)) {
      cluster.joinAll();
      // A second agent for worker 2 is a new incarnation of that task: a restart.
      CoordinationAgent restarted = new CoordinationAgent(cluster.cluster(), W2, W0,
          cluster.worker(2).channels().get(io.muster.cluster.HostPort.parse(cluster.cluster().taskAddress(W0))),
          false, FAST, e -> {});
      try (restarted) {
        CoordinationException refused = assertThrows(CoordinationException.class, restarted::join);
        assertEquals(Status.Code.ABORTED, refused.code());
        assertTrue(refused.getMessage().contains("unexpectedly tried to connect with a different incarnation. "
            + "It has likely restarted."), refused.getMessage());
      }
      Eventually.within(Duration.ofSeconds(5), "workers 0 and 1 told of the restart",
          () -> !cluster.errors(W0).isEmpty() && !cluster.errors(W1).isEmpty());
      CoordinationException told = cluster.errors(W1).get(0);
      assertEquals(Optional.of(W2), told.sourceTask());
      assertTrue(told.getMessage().contains("has restarted"), told.getMessage());
      assertEquals(TaskState.ERROR, cluster.worker(1).agent().taskStates().get(2).state());
    }
  }

  @Test
  void aTaskThatStopsHeartbeatingIsDeclaredFailedToEveryOtherTask() throws Exception {
    try (LocalCluster cluster = LocalCluster.workers(3, FAST)) {
      cluster.joinAll();
      cluster.worker(2).agent().close(); // heartbeats stop, nothing is said
      Eventually.within(Duration.ofSeconds(60), "error callbacks on workers 0 and 1",
          () -> !cluster.errors(W0).isEmpty() && !cluster.errors(W1).isEmpty());
      CoordinationException error = cluster.errors(W0).get(0);
      assertEquals(Status.Code.UNAVAILABLE, error.code());
      assertEquals(Optional.of(W2), error.sourceTask());
      assertTrue(error.getMessage().contains("The following tasks are unhealthy (stopped sending heartbeats for "
          + FAST.heartbeatTimeout().toSeconds() + " s): /job:worker/replica:0/task:2 (" + cluster.cluster().taskAddress(W2)
          + ")\n"), error.getMessage());
      assertEquals(TaskState.ERROR, cluster.worker(0).agent().state());
      assertEquals(1, cluster.errors(W0).size(), "the callback runs once: " + cluster.errors(W0));
      // Once, even when a second failure follows: the leader goes away, worker 1's heartbeats go
      // unanswered for twice the heartbeat timeout, and its callback is not called again.
      cluster.stop(W0);
      Thread.sleep(FAST.heartbeatTimeout().multipliedBy(2).toMillis());
      assertEquals(1, cluster.errors(W1).size(), "the callback runs once: " + cluster.errors(W1));
    }
  }

  @Test
  void anUnreachableLeaderIsAnErrorOnEveryAgent() throws Exception {
    try (LocalCluster cluster = LocalCluster.workers(3, FAST)) {
      cluster.joinAll();
      cluster.stop(W0); // the leader's process goes away
      Eventually.within(Duration.ofSeconds(2 + 5), "error callbacks on workers 1 and 2",
          () -> !cluster.errors(W1).isEmpty() && !cluster.errors(W2).isEmpty());
      String message = cluster.errors(W2).get(0).getMessage();
      assertTrue(message.contains("coordination leader worker 0 at " + cluster.cluster().taskAddress(W0)), message);
    }
  }

  @Test
  void aReportedErrorReachesTheOtherTasksWithItsSource() throws Exception {
    try (LocalCluster cluster = LocalCluster.workers(3, FAST)) {
      cluster.joinAll();
      cluster.worker(1).agent().reportError(Status.Code.INTERNAL, "out of memory in step 12");
      Eventually.within(Duration.ofSeconds(5), "workers 0 and 2 told",
          () -> !cluster.errors(W0).isEmpty() && !cluster.errors(W2).isEmpty());
      CoordinationException error = cluster.errors(W2).get(0);
      assertEquals(Status.Code.INTERNAL, error.code());
      assertEquals(Optional.of(W1), error.sourceTask());
      assertTrue(error.getMessage().contains("reported an error: out of memory in step 12"), error.getMessage());
    }
  }

  /** A killed task reports from an interrupted thread: the report goes out, and the thread stays interrupted. */
  @Test
  void anInterruptedThreadsReportStillReachesTheOthersAndKeepsItsInterrupt() throws Exception {
    try (LocalCluster cluster = LocalCluster.workers(3, FAST)) {
      cluster.joinAll();
      Thread.currentThread().interrupt();
      try {
        cluster.worker(1).agent().reportError(Status.Code.INTERNAL, "killed in step 7");
      } finally {
        assertTrue(Thread.interrupted(), "the thread keeps its interrupt");
      }
      Eventually.within(Duration.ofSeconds(5), "workers 0 and 2 told",
          () -> !cluster.errors(W0).isEmpty() && !cluster.errors(W2).isEmpty());
      String message = cluster.errors(W2).get(0).getMessage();
      assertTrue(message.contains("reported an error: killed in step 7"), message);
    }
  }

  // ---- barriers ----

  @Test
  void aBarrierBlocksUntilTheLastArrivesAndCanBeUsedAgain() throws Exception {
    try (LocalCluster cluster = LocalCluster.workers(3, FAST)) {
      cluster.joinAll();
      for (int round = 0; round < 2; round++) {
        List<CompletableFuture<Void>> early = List.of(0, 1).stream()
            .map(i -> CompletableFuture.runAsync(
                () -> cluster.worker(i).agent().barrier("epoch", Duration.ofSeconds(10), List.of()), callers))
            .toList();
        CompletableFuture<Void> both = CompletableFuture.allOf(early.toArray(CompletableFuture[]::new));
        // the two that came wait for the third: still waiting well after they have reached the service
        assertThrows(TimeoutException.class, () -> both.get(500, TimeUnit.MILLISECONDS), "round " + round);
        cluster.worker(2).agent().barrier("epoch", Duration.ofSeconds(10), List.of());
        both.get(15, TimeUnit.SECONDS);
      }
    }
  }

  @Test
  void barrierTimesOutNamingWhoDidNotArrive() throws Exception {
    try (LocalCluster cluster = LocalCluster.workers(3, FAST)) {
      cluster.joinAll();
      var second = CompletableFuture.runAsync(() -> cluster.worker(1).agent().barrier("b", Duration.ofSeconds(1), List.of()),
          callers);
      CoordinationException timeout = assertThrows(CoordinationException.class,
          () -> cluster.worker(0).agent().barrier("b", Duration.ofSeconds(1), List.of()));
      assertEquals(Status.Code.DEADLINE_EXCEEDED, timeout.code());
      assertTrue(timeout.getMessage().contains("Barrier timed out. Id: b. # of tasks that reached the barrier: 2/3"),
          timeout.getMessage());
      assertTrue(timeout.getMessage().contains("Tasks that did not reach it: /job:worker/replica:0/task:2"), timeout.getMessage());
      assertThrows(Exception.class, () -> second.get(5, TimeUnit.SECONDS));
    }
  }

  @Test
  void barrierWithADeadParticipantFailsBeforeItsTimeout() throws Exception {
    try (LocalCluster cluster = LocalCluster.workers(3, FAST)) {
      cluster.joinAll();
      cluster.worker(2).agent().close();
      var fromOne = CompletableFuture.runAsync(() -> cluster.worker(1).agent().barrier("b", Duration.ofSeconds(60), List.of()),
          callers);
      // The barrier's own 60 s timeout would fail it as DEADLINE_EXCEEDED; INTERNAL naming the dead task is the early failure.
      CoordinationException failed = assertThrows(CoordinationException.class,
          () -> cluster.worker(0).agent().barrier("b", Duration.ofSeconds(60), List.of()));
      assertEquals(Status.Code.INTERNAL, failed.code());
      assertTrue(failed.getMessage().contains("Barrier b failed because task /job:worker/replica:0/task:2"), failed.getMessage());
      assertThrows(Exception.class, () -> fromOne.get(5, TimeUnit.SECONDS));
    }
  }

  @Test
  void barrierOverASubsetOfTasks() throws Exception {
    try (LocalCluster cluster = LocalCluster.workers(3, FAST)) {
      cluster.joinAll();
      List<TaskId> pair = List.of(W0, W2);
      var zero = CompletableFuture.runAsync(() -> cluster.worker(0).agent().barrier("pair", Duration.ofSeconds(5), pair),
          callers);
      cluster.worker(2).agent().barrier("pair", Duration.ofSeconds(5), pair);
      zero.get(5, TimeUnit.SECONDS);
      CoordinationException outsider = assertThrows(CoordinationException.class,
          () -> cluster.worker(1).agent().barrier("pair2", Duration.ofSeconds(5), pair));
      assertEquals(Status.Code.INVALID_ARGUMENT, outsider.code());
    }
  }

  @Test
  void cancelledBarrierFailsTheWaitersAndAPassedOneCannotBeCancelled() throws Exception {
    try (LocalCluster cluster = LocalCluster.workers(3, FAST)) {
      cluster.joinAll();
      var waiting = CompletableFuture.supplyAsync(() -> assertThrows(CoordinationException.class,
          () -> cluster.worker(0).agent().barrier("c", Duration.ofSeconds(30), List.of())), callers);
      Eventually.within(Duration.ofSeconds(30), "worker 0 waiting at barrier c",
          () -> serviceOf(cluster).waiting().equals("barrier c: worker 0"));
      cluster.worker(1).agent().cancelBarrier("c");
      CoordinationException cancelled = waiting.get(30, TimeUnit.SECONDS);
      assertEquals(Status.Code.CANCELLED, cancelled.code());
      assertTrue(cancelled.getMessage().contains("Barrier c was cancelled by task /job:worker/replica:0/task:1"),
          cancelled.getMessage());

      // Workers 0 and 1 pass use 0 of barrier p; worker 2, still at use 0 of p, cannot cancel it.
      List<TaskId> pair = List.of(W0, W1);
      var zero = CompletableFuture.runAsync(() -> cluster.worker(0).agent().barrier("p", Duration.ofSeconds(30), pair),
          callers);
      cluster.worker(1).agent().barrier("p", Duration.ofSeconds(30), pair);
      zero.get(30, TimeUnit.SECONDS);
      CoordinationException refused = assertThrows(CoordinationException.class,
          () -> cluster.worker(2).agent().cancelBarrier("p"));
      assertEquals(Status.Code.FAILED_PRECONDITION, refused.code());
      assertTrue(refused.getMessage().contains("Barrier p (use 0) has already completed; it cannot be cancelled"),
          refused.getMessage());
    }
  }

  @Test
  void shutdownBarrierHoldsEarlyTasksUntilEveryoneLeaves() throws Exception {
    try (LocalCluster cluster = LocalCluster.workers(2, FAST.withShutdownBarrierTimeout(Duration.ofSeconds(10)))) {
      cluster.joinAll();
      var early = CompletableFuture.runAsync(() -> cluster.worker(1).agent().shutdown(), callers);
      Eventually.within(Duration.ofSeconds(30), "worker 1 waiting at the shutdown barrier",
          () -> serviceOf(cluster).waiting().equals("barrier " + CoordinationService.SHUTDOWN_BARRIER + ": worker 1"));
      assertTrue(!early.isDone(), "worker 1 must wait at the shutdown barrier");
      cluster.worker(0).agent().shutdown();
      early.get(5, TimeUnit.SECONDS);
      assertEquals(TaskState.DISCONNECTED, cluster.worker(1).agent().state());
      assertTrue(cluster.errors(W0).isEmpty() && cluster.errors(W1).isEmpty(), "a clean shutdown reports no error");
    }
  }

  // ---- key-value store ----

  @Test
  void keyValueInsertGetAndWaitForAKeyAnotherTaskInserts() throws Exception {
    try (LocalCluster cluster = LocalCluster.workers(2, FAST)) {
      cluster.joinAll();
      CoordinationAgent zero = cluster.worker(0).agent();
      CoordinationAgent one = cluster.worker(1).agent();
      var waiting = CompletableFuture.supplyAsync(() -> one.get("/addr//worker/0", Duration.ofSeconds(30)), callers);
      Eventually.within(Duration.ofSeconds(30), "worker 1's get waiting at the service",
          () -> serviceOf(cluster).waiting().equals("1 GetKeyValue call waiting for its key"));
      assertTrue(!waiting.isDone(), "the get waits for the key");
      zero.insert("addr/worker/0", "10.0.0.1:5".getBytes(), false);
      assertEquals("10.0.0.1:5", new String(waiting.get(5, TimeUnit.SECONDS)));

      CoordinationException exists = assertThrows(CoordinationException.class,
          () -> one.insert("addr/worker/0", new byte[] {1}, false));
      assertEquals(Status.Code.ALREADY_EXISTS, exists.code());
      assertTrue(exists.getMessage().contains("key addr/worker/0 already exists."), exists.getMessage());
      one.insert("addr/worker/0", new byte[] {1}, true);
      assertArrayEquals(new byte[] {1}, zero.tryGet("addr/worker/0").orElseThrow());
      assertEquals(Optional.empty(), zero.tryGet("addr/worker/9"));
    }
  }

  @Test
  void keyValueGetTimesOutNamingTheKey() throws Exception {
    try (LocalCluster cluster = LocalCluster.workers(1, FAST)) {
      cluster.joinAll();
      DeadlineExceededException e = assertThrows(DeadlineExceededException.class,
          () -> cluster.worker(0).agent().get("never", Duration.ofMillis(300)));
      assertEquals("GetKeyValue() timed out with key: never after PT0.3S", e.getMessage());
    }
  }

  @Test
  void keyValueDirectoryListingAndRecursiveDelete() throws Exception {
    try (LocalCluster cluster = LocalCluster.workers(1, FAST)) {
      cluster.joinAll();
      CoordinationAgent agent = cluster.worker(0).agent();
      agent.insert("job/a", "1".getBytes(), false);
      agent.insert("job/b/c", "2".getBytes(), false);
      agent.insert("job", "root".getBytes(), false);
      agent.insert("jobs/x", "other".getBytes(), false);
      assertEquals(List.of("job/a", "job/b/c"), List.copyOf(agent.getDir("/job/").keySet()));
      agent.delete("job");
      assertEquals(Map.of(), agent.getDir("job"));
      assertEquals(Optional.empty(), agent.tryGet("job"));
      assertEquals("other", new String(agent.tryGet("jobs/x").orElseThrow()));
    }
  }

  @Test
  void keyValueIncrementCountsFromZero() throws Exception {
    try (LocalCluster cluster = LocalCluster.workers(2, FAST)) {
      cluster.joinAll();
      assertEquals(1, cluster.worker(0).agent().increment("step", 1));
      assertEquals(6, cluster.worker(1).agent().increment("step", 5));
      assertArrayEquals(new byte[] {0, 0, 0, 0, 0, 0, 0, 6}, cluster.worker(0).agent().tryGet("step").orElseThrow());
    }
  }

  @Test
  void aLeaderThatNeverComesIsNamedAtTheDeadline() throws Exception {
    try (LocalCluster cluster = LocalCluster.workers(2, FAST.withJoinTimeout(Duration.ofSeconds(2)))) {
      cluster.stop(W0);
      DeadlineExceededException e = assertThrows(DeadlineExceededException.class, () -> cluster.worker(1).join());
      assertTrue(e.getMessage().contains("could not register with the coordination service within 2 s: "
          + "coordination leader worker 0 at " + cluster.cluster().taskAddress(W0) + ": connection refused"), e.getMessage());
    }
  }

  /**
   * A refused call names its task only when it came from that task's host: one claiming worker 2
   * from 127.0.0.2 (worker 2 is at 127.0.0.1) changes nothing, and the join fails at its deadline
   * with worker 2 missing; one from 127.0.0.1 names worker 2 as refused.
   */
  @Test
  void aRefusedCallNamesItsTaskOnlyFromThatTasksHost() throws Exception {
    CoordinationOptions shortJoin = FAST.withJoinTimeout(Duration.ofSeconds(3));
    try (LocalCluster cluster = LocalCluster.workers(3, shortJoin)) {
      cluster.stop(W2);
      CoordinationService service = cluster.worker(0).service().orElseThrow();
      service.callerRefused(new io.muster.internal.rpc.RefusedCall(Optional.of(W2.fullName()),
          java.net.InetAddress.getByName("127.0.0.2"), "wrong job token"));
      var failure = assertThrows(java.util.concurrent.ExecutionException.class, () -> cluster.join(List.of(W0, W1)));
      assertTrue(failure.getCause() instanceof DeadlineExceededException, failure.getCause().toString());
      String w2 = cluster.cluster().taskAddress(W2);
      assertTrue(failure.getCause().getMessage().contains("worker 2 at " + w2 + ": connection refused"),
          failure.getCause().getMessage());

      service.callerRefused(new io.muster.internal.rpc.RefusedCall(Optional.of(W2.fullName()),
          java.net.InetAddress.getByName("127.0.0.1"), "wrong job token"));
      CoordinationException refused = assertThrows(CoordinationException.class, () -> cluster.worker(1).agent().join());
      assertEquals(Status.Code.UNAUTHENTICATED, refused.code());
      assertEquals("UNAUTHENTICATED: worker 1 cannot complete the cluster: worker 2 at " + w2 + ": refused: wrong job "
          + "token (its calls carry a MUSTER_JOB_TOKEN other than this task's; every task of a job needs the same)",
          refused.getMessage());
    }
  }
}
