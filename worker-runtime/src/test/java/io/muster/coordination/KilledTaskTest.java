package io.muster.coordination;

import io.muster.internal.coordination.TaskRuntime;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.muster.cluster.ClusterSpec;
import io.muster.cluster.HostPort;
import io.muster.cluster.TaskId;
import io.muster.cluster.TfConfig;
import io.muster.rpc.JobToken;
import io.muster.rpc.PeerUnavailableException;
import io.muster.rpc.Security;
import io.muster.internal.rpc.TaskServer;
import io.muster.testing.ChildJvm;
import io.muster.testing.Eventually;
import io.muster.testing.JoinAndWait;
import io.muster.testing.LocalCluster;
import io.muster.testing.ServerOnly;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/** One task of a joined job is a child JVM killed with SIGKILL; the tasks left must hear of it in time. */
class KilledTaskTest {

  private static final Duration HEARTBEAT_TIMEOUT = Duration.ofSeconds(2);
  private static final CoordinationOptions OPTIONS = CoordinationOptions.DEFAULTS
      .withHeartbeatTimeout(HEARTBEAT_TIMEOUT).withJoinTimeout(Duration.ofSeconds(60))
      .withProgressInterval(Duration.ofSeconds(1));
  private static final Path LOGS = Path.of("target", "child-logs");

  @Test
  void killedWorkerIsReportedToEveryOtherTaskNamingIt() throws Exception {
    runWithChild(3, (errors, cluster) -> {
      for (int i = 0; i < 3; i++) {
        CoordinationException e = errors.get(i).get(0);
        assertEquals(Optional.of(new TaskId("worker", 3)), e.sourceTask(), e.getMessage());
        assertTrue(e.getMessage().contains("/job:worker/replica:0/task:3 (" + cluster.taskAddress(new TaskId("worker", 3))
            + ")"), e.getMessage());
      }
    });
  }

  @Test
  void killedLeaderIsReportedToEveryOtherTaskNamingIt() throws Exception {
    runWithChild(0, (errors, cluster) -> {
      for (int i = 0; i < 3; i++) {
        String message = errors.get(i).get(0).getMessage();
        assertTrue(message.contains("coordination leader worker 0 at " + cluster.taskAddress(new TaskId("worker", 0))),
            message);
      }
    });
  }

  @Test
  void leaderKilledBeforeTheOthersRegisterFailsTheirJoinNamingIt() throws Exception {
    Security security = Security.of(LocalCluster.TOKEN);
    // The leader binds port 0 and reports it (no port reserved and released); it does not host the
    // coordination service yet: worker 1 reaches it and is not registered.
    try (TaskServer server = TaskServer.start(new TaskId("worker", 1), new HostPort("127.0.0.1", 0), security);
        ChildJvm leader = ChildJvm.start("leader-before-service", ServerOnly.class, List.of("worker", "0"),
            Map.of(JobToken.ENV, LocalCluster.TOKEN.value()), LOGS)) {
      String leaderAddress = leader.awaitLine("BOUND ", Duration.ofSeconds(60));
      ClusterSpec cluster = ClusterSpec.of(Map.of("worker", List.of(leaderAddress, server.address().toString())));
      try (TaskRuntime runtime = TaskRuntime.builder(TfConfig.of(cluster, new TaskId("worker", 1)), security)
              .server(server).options(OPTIONS).start()) {
        leader.awaitOutput("READY", Duration.ofSeconds(60));
        CompletableFuture<TaskRuntime> join = CompletableFuture.supplyAsync(runtime::join);
        // A third attempt means the second was answered (UNIMPLEMENTED): worker 1 has reached the leader.
        Eventually.within(Duration.ofSeconds(30), "three registration attempts at the leader",
            () -> leader.output().split("REGISTER-ATTEMPT", -1).length > 3);
        assertTrue(!join.isDone(), "the join waits for the leader's service");
        long killed = System.nanoTime();
        leader.kill();
        ExecutionException failure = assertThrows(ExecutionException.class,
            () -> join.get(HEARTBEAT_TIMEOUT.plusSeconds(5).toMillis(), TimeUnit.MILLISECONDS));
        Duration took = Duration.ofNanos(System.nanoTime() - killed);
        System.out.println("the join failed " + took.toMillis() + " ms after SIGKILL of the leader");
        assertTrue(failure.getCause() instanceof PeerUnavailableException, failure.getCause().toString());
        assertTrue(failure.getCause().getMessage().contains("coordination leader worker 0 at " + leaderAddress
            + " stopped answering during the join"), failure.getCause().getMessage());
      }
    }
  }

  /**
   * The leader goes silent (SIGSTOP: no reset, no refusal, as a host cut off) while a worker waits
   * at the shutdown barrier: the wait ends at the heartbeat timeout, naming the leader, not at the
   * barrier's deadline (a minute) plus the heartbeat timeout.
   */
  @Test
  void aLeaderSilentWhileAWorkerWaitsAtTheShutdownBarrierEndsTheWaitAtTheHeartbeatTimeout() throws Exception {
    Duration barrier = Duration.ofMinutes(1);
    withChildJoined(0, barrier, (child, runtimes, errors, cluster) -> {
      CompletableFuture<Void> leaving = CompletableFuture.runAsync(() -> runtimes.get(0).agent().shutdown());
      Thread.sleep(500); // at the barrier: the other tasks never come
      assertTrue(!leaving.isDone(), "worker 1 waits at the shutdown barrier");
      long pid = child.process().pid();
      assertEquals(0, new ProcessBuilder("kill", "-STOP", Long.toString(pid)).start().waitFor());
      try {
        ExecutionException failed = assertThrows(ExecutionException.class,
            () -> leaving.get(barrier.toMillis(), TimeUnit.MILLISECONDS));
        assertTrue(failed.getCause().getMessage().startsWith("UNAVAILABLE: worker 1 shutdown: the coordination leader "
            + "worker 0 was lost at the shutdown barrier: no heartbeat answer for "), failed.getCause().getMessage());
        assertTrue(failed.getCause().getMessage().contains("coordination leader worker 0 at "
            + cluster.taskAddress(new TaskId("worker", 0))), failed.getCause().getMessage());
      } finally {
        new ProcessBuilder("kill", "-CONT", Long.toString(pid)).start().waitFor();
      }
    });
  }

  interface Check {
    void verify(List<List<CoordinationException>> errors, ClusterSpec cluster);
  }

  interface Joined {
    void run(ChildJvm child, List<TaskRuntime> runtimes, List<List<CoordinationException>> errors, ClusterSpec cluster)
        throws Exception;
  }

  /** Four workers joined, {@code childIndex} in a child JVM, then SIGKILL of the child. */
  private void runWithChild(int childIndex, Check check) throws Exception {
    withChildJoined(childIndex, Duration.ZERO, (child, runtimes, errors, cluster) -> {
      child.kill();
      // a hang guard, not a speed claim: how soon the failure arrives is measured by the benchmarks
      Duration took = Eventually.within(Duration.ofSeconds(60), "the failure reaching all three tasks",
          () -> errors.stream().noneMatch(List::isEmpty));
      System.out.println("failure of worker " + childIndex + " reached every task " + took.toMillis() + " ms after SIGKILL");
      check.verify(errors, cluster);
    });
  }

  /**
   * Four workers, {@code childIndex} in a child JVM and the other three here, once all have joined;
   * {@code shutdownBarrier} is every task's shutdown barrier timeout (zero: none).
   */
  private void withChildJoined(int childIndex, Duration shutdownBarrier, Joined body) throws Exception {
    CoordinationOptions options = OPTIONS.withShutdownBarrierTimeout(shutdownBarrier);
    Security security = Security.of(LocalCluster.TOKEN);
    List<TaskServer> servers = new ArrayList<>();
    List<String> addresses = new ArrayList<>();
    List<TaskRuntime> runtimes = new ArrayList<>();
    List<List<CoordinationException>> errors = new ArrayList<>();
    ExecutorService pool = Executors.newFixedThreadPool(3);
    // Every server, the child's too, is bound (port 0) before the cluster is written down: the
    // child reports its bound address and then reads its TF_CONFIG from standard input.
    try (ChildJvm child = ChildJvm.start("killed-" + childIndex, JoinAndWait.class,
        List.of(String.valueOf(HEARTBEAT_TIMEOUT.toMillis()), "worker", String.valueOf(childIndex),
            String.valueOf(shutdownBarrier.toMillis())),
        Map.of(JobToken.ENV, LocalCluster.TOKEN.value()), LOGS)) {
      for (int i = 0; i < 4; i++) {
        if (i == childIndex) {
          addresses.add(child.awaitLine("BOUND ", Duration.ofSeconds(60)));
          servers.add(null);
        } else {
          TaskServer server = TaskServer.start(new TaskId("worker", i), new HostPort("127.0.0.1", 0), security);
          servers.add(server);
          addresses.add(server.address().toString());
        }
      }
      ClusterSpec cluster = ClusterSpec.of(Map.of("worker", addresses));
      child.send(TfConfig.of(cluster, new TaskId("worker", childIndex)).toJson());
      for (int i = 0; i < 4; i++) {
        if (i != childIndex) {
          List<CoordinationException> taskErrors = new CopyOnWriteArrayList<>();
          errors.add(taskErrors);
          runtimes.add(TaskRuntime.builder(TfConfig.of(cluster, new TaskId("worker", i)), security)
              .server(servers.get(i)).options(options).onError(taskErrors::add).start());
        }
      }
      List<CompletableFuture<TaskRuntime>> joins = runtimes.stream()
          .map(r -> CompletableFuture.supplyAsync(r::join, pool)).toList();
      child.awaitOutput("JOINED", Duration.ofSeconds(60));
      for (CompletableFuture<TaskRuntime> join : joins) {
        join.get(30, TimeUnit.SECONDS);
      }
      assertTrue(runtimes.stream().allMatch(r -> r.agent().state() == TaskState.CONNECTED), "all joined");
      body.run(child, runtimes, errors, cluster);
    } finally {
      pool.shutdownNow();
      runtimes.forEach(TaskRuntime::close);
      servers.stream().filter(s -> s != null).forEach(TaskServer::close);
    }
  }
}
