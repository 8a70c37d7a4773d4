package io.muster.strategy;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.muster.cluster.ClusterConfigException;
import io.muster.cluster.ClusterSpec;
import io.muster.cluster.HostPort;
import io.muster.cluster.TaskId;
import io.muster.collective.CommunicationOptions;
import io.muster.coordination.CoordinationOptions;
import io.muster.rpc.Security;
import io.muster.internal.rpc.TaskServer;
import io.muster.testing.LocalCluster;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.function.Function;
import org.junit.jupiter.api.Test;

class MultiWorkerMirroredStrategyTest {

  private static final Security SECURITY = Security.of(LocalCluster.TOKEN);
  private static final CoordinationOptions COORDINATION = CoordinationOptions.DEFAULTS
      .withHeartbeatTimeout(Duration.ofSeconds(5)).withJoinTimeout(Duration.ofSeconds(30))
      .withShutdownBarrierTimeout(Duration.ofSeconds(30));

  /** Builds a strategy on every task of a chief + workers cluster concurrently and applies {@code body} on each. */
  static <T> List<T> onEveryTask(List<TaskId> tasks, CommunicationOptions communication,
      Function<MultiWorkerMirroredStrategy, T> body) throws Exception {
    List<TaskServer> servers = new ArrayList<>();
    Map<String, Map<Integer, String>> jobs = new LinkedHashMap<>();
    for (TaskId task : tasks) {
      TaskServer server = TaskServer.start(task, new HostPort("127.0.0.1", 0), SECURITY);
      servers.add(server);
      jobs.computeIfAbsent(task.job(), j -> new LinkedHashMap<>()).put(task.index(), server.address().toString());
    }
    ClusterSpec cluster = ClusterSpec.ofSparse(jobs);
    try {
      List<CompletableFuture<T>> runs = new ArrayList<>();
      for (TaskServer server : servers) {
        runs.add(CompletableFuture.supplyAsync(() -> {
          try (MultiWorkerMirroredStrategy strategy = MultiWorkerMirroredStrategy.builder()
              .cluster(cluster, server.task()).security(SECURITY).server(server)
              .coordination(COORDINATION).communication(communication).join()) {
            return body.apply(strategy);
          }
        }, r -> new Thread(r, "mwms-test-" + server.task()).start()));
      }
      List<T> results = new ArrayList<>();
      for (CompletableFuture<T> run : runs) {
        results.add(run.get(60, TimeUnit.SECONDS));
      }
      return results;
    } finally {
      servers.forEach(TaskServer::close);
    }
  }

  static final List<TaskId> CHIEF_AND_TWO_WORKERS =
      List.of(new TaskId("chief", 0), new TaskId("worker", 0), new TaskId("worker", 1));

  @Test
  void replicasRanksAndChiefFollowTensorFlowsRules() throws Exception {
    List<String> seen = onEveryTask(CHIEF_AND_TWO_WORKERS, CommunicationOptions.DEFAULTS,
        s -> s.taskId() + " replicas=" + s.numReplicasInSync() + " chief=" + s.isChief() + " pipeline="
            + s.inputPipelineId() + "/" + s.numInputPipelines());
    assertEquals(List.of("chief 0 replicas=3 chief=true pipeline=0/3", "worker 0 replicas=3 chief=false pipeline=1/3",
        "worker 1 replicas=3 chief=false pipeline=2/3"), seen);
  }

  @Test
  void broadcastFromChiefMakesEveryReplicaStartIdentical() throws Exception {
    List<List<float[]>> vars = onEveryTask(CHIEF_AND_TWO_WORKERS, CommunicationOptions.DEFAULTS, s -> {
      float seed = s.inputPipelineId() + 1;
      List<float[]> variables = List.of(new float[] {seed, seed * 2}, new float[] {seed * 3});
      s.broadcastFromChief(variables);
      return variables;
    });
    for (List<float[]> v : vars) {
      assertArrayEquals(new float[] {1, 2}, v.get(0));
      assertArrayEquals(new float[] {3}, v.get(1));
    }
  }

  @Test
  void gradientsAreAveragedAcrossReplicasInSmallPacks() throws Exception {
    CommunicationOptions packs = CommunicationOptions.DEFAULTS.withBytesPerPack(16);
    List<List<float[]>> grads = onEveryTask(CHIEF_AND_TWO_WORKERS, packs, s -> {
      float x = s.inputPipelineId();
      List<float[]> g = List.of(new float[] {x, x, x, x, x}, new float[] {1}, new float[0], new float[] {3 * x, 6});
      s.allReduce(g);
      return g;
    });
    for (List<float[]> g : grads) {
      assertArrayEquals(new float[] {1, 1, 1, 1, 1}, g.get(0)); // mean of 0, 1, 2
      assertArrayEquals(new float[] {1}, g.get(1));
      assertArrayEquals(new float[0], g.get(2));
      assertArrayEquals(new float[] {3, 6}, g.get(3));
    }
  }

  @Test
  void aTaskThatFinishesEarlyWaitsForTheOthersAtShutdown() throws Exception {
    List<String> events = java.util.Collections.synchronizedList(new java.util.ArrayList<>());
    onEveryTask(List.of(new TaskId("worker", 0), new TaskId("worker", 1)), CommunicationOptions.DEFAULTS, s -> {
      int worker = s.inputPipelineId();
      if (worker == 1) {
        sleep(1500); // worker 1 is still training
      }
      events.add("worker " + worker + " closing");
      s.close(); // closing twice (here and at the end of the try) is harmless
      events.add("worker " + worker + " closed");
      return null;
    });
    // worker 0 closes first and leaves only after worker 1 has come to close too (sleeps set the
    // order of arrival; the assertion is on the order of events, not on their times)
    assertEquals("worker 0 closing", events.get(0), events.toString());
    assertTrue(events.indexOf("worker 1 closing") < events.indexOf("worker 0 closed"),
        "worker 0 left before worker 1 finished: " + events);
    assertTrue(events.containsAll(List.of("worker 0 closed", "worker 1 closed")), events.toString());
  }

  @Test
  void configurationErrorsNameTheProblem() {
    ClusterSpec withPs = ClusterSpec.of(Map.of("worker", List.of("127.0.0.1:1"), "ps", List.of("127.0.0.1:2")));
    ClusterConfigException ps = assertThrows(ClusterConfigException.class, () -> MultiWorkerMirroredStrategy.builder()
        .cluster(withPs, new TaskId("ps", 0)).security(SECURITY).join());
    assertEquals("MultiWorkerMirroredStrategy runs on chief and worker tasks; this task is ps 0 (a ps or evaluator "
        + "runs its own server instead)", ps.getMessage());
    ClusterConfigException empty = assertThrows(ClusterConfigException.class, () -> MultiWorkerMirroredStrategy.builder()
        .environment(Map.of("MUSTER_JOB_TOKEN", "x")).join());
    assertEquals("MultiWorkerMirroredStrategy needs a cluster: TF_CONFIG has no \"cluster\"", empty.getMessage());
    IllegalArgumentException pack = assertThrows(IllegalArgumentException.class,
        () -> CommunicationOptions.DEFAULTS.withBytesPerPack(-1));
    assertEquals("bytesPerPack must be >= 0, was -1", pack.getMessage());
    assertEquals(CommunicationOptions.Implementation.NCCL, CommunicationOptions.Implementation.parse("nccl"));
  }

  /** An option set to null fails at build(), naming the option, before anything starts. */
  @Test
  void anOptionSetToNullIsNamedAtBuild() {
    ClusterSpec one = ClusterSpec.of(Map.of("worker", List.of("127.0.0.1:1")));
    IllegalArgumentException communication = assertThrows(IllegalArgumentException.class,
        () -> MultiWorkerMirroredStrategy.builder().cluster(one, new TaskId("worker", 0)).communication(null).join());
    assertEquals("communication must not be null; leave it unset for its default", communication.getMessage());
    IllegalArgumentException coordination = assertThrows(IllegalArgumentException.class,
        () -> MultiWorkerMirroredStrategy.builder().cluster(one, new TaskId("worker", 0)).coordination(null).join());
    assertEquals("coordination must not be null; leave it unset for its default", coordination.getMessage());
    IllegalArgumentException coordinator = assertThrows(IllegalArgumentException.class,
        () -> ParameterServerStrategy.builder().coordinator(null).join());
    assertEquals("coordinator must not be null; leave it unset for its default", coordinator.getMessage());
    IllegalArgumentException environment = assertThrows(IllegalArgumentException.class,
        () -> ParameterServerStrategy.builder().environment(null).join());
    assertEquals("environment must not be null; leave it unset for its default", environment.getMessage());
  }

  private static void sleep(long ms) {
    try {
      Thread.sleep(ms);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }
}
