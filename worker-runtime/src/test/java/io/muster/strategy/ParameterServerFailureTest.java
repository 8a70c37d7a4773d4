package io.muster.strategy;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.muster.cluster.TaskId;
import io.muster.coordinator.ClusterCoordinator;
import io.muster.coordinator.PerWorkerValues;
import io.muster.coordinator.RemoteValue;
import io.muster.coordinator.Value;
import io.muster.ps.Optimizer;
import io.muster.ps.ParameterServerUnavailableException;
import io.muster.testing.ChildJvm;
import io.muster.testing.Eventually;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * TensorFlow's failure semantics for parameter-server training, with real processes killed by
 * SIGKILL: a lost worker costs nothing but time (its closures run elsewhere, at least once), and
 * comes back with its resources; a lost ps ends the job, naming it.
 */
class ParameterServerFailureTest {

  private static final TaskId WORKER_0 = new TaskId("worker", 0);
  private static final TaskId WORKER_1 = new TaskId("worker", 1);
  private static final Duration HEARTBEAT_TIMEOUT = PsTaskMain.COORDINATION.heartbeatTimeout();

  @Test
  void aWorkerKilledMidClosureCostsNothingButTimeAndComesBackWithItsResources(@TempDir Path dir) {
    try (PsJob job = PsJob.start(2, 1, Set.of(WORKER_0, WORKER_1), dir, ClusterCoordinator.Options.DEFAULTS)) {
      ClusterCoordinator coordinator = job.coordinator();
      coordinator.variables().create("count", new long[] {1}, Optimizer.NONE);
      PerWorkerValues counters = coordinator.createPerWorkerResource("counter", Value.of(1000L));
      int scheduled = 150;
      List<RemoteValue> counts = new ArrayList<>();
      List<RemoteValue> squares = new ArrayList<>();
      for (long i = 0; i < scheduled; i++) {
        counts.add(coordinator.schedule("count", Value.of(10L)));
        squares.add(coordinator.schedule("square", Value.of(i), Value.of(10L)));
      }
      Eventually.within(Duration.ofSeconds(60), "worker 1 running closures",
          () -> counts.stream().filter(v -> v.status() == RemoteValue.Status.READY).mapToLong(v -> v.fetch().longValue())
              .anyMatch(w -> w == 1));
      job.kill(WORKER_1);

      coordinator.join();
      long squareSum = 0;
      long expectedSum = 0;
      for (int i = 0; i < scheduled; i++) {
        squareSum += squares.get(i).fetch().longs()[0];
        expectedSum += (long) i * i;
        counts.get(i).fetch();
      }
      assertEquals(expectedSum, squareSum, "an idempotent workload gives the exact result");
      float count = coordinator.variables().variable("count").read()[0];
      assertTrue(count >= scheduled && count <= scheduled + 1, "the non-idempotent counter ran each closure at least "
          + "once and at most once more for the one closure in flight on the killed worker: " + count);

      // Started again, worker 1 rejoins the running job; its per-worker resource is created afresh.
      ChildJvm restarted = job.restart(WORKER_1);
      PsJob.await(restarted, "worker 1 serving");
      long[] firstOnWorker1 = null;
      long deadline = System.nanoTime() + Duration.ofSeconds(60).toNanos();
      while (firstOnWorker1 == null && System.nanoTime() < deadline) {
        List<RemoteValue> ticks = new ArrayList<>();
        for (int i = 0; i < 20; i++) {
          ticks.add(coordinator.schedule("tick", counters));
        }
        coordinator.join();
        for (RemoteValue t : ticks) {
          long[] r = t.fetch().longs();
          if (r[0] == 1 && firstOnWorker1 == null) {
            firstOnWorker1 = r;
          }
        }
      }
      assertTrue(firstOnWorker1 != null, "the restarted worker 1 takes closures again");
      assertEquals(1001L, firstOnWorker1[1], "its counter was created again from the resource function");
    }
  }

  @Test
  void aKilledParameterServerEndsTheJobNamingIt(@TempDir Path dir) {
    TaskId ps1 = new TaskId("ps", 1);
    try (PsJob job = PsJob.start(2, 2, Set.of(ps1), dir, ClusterCoordinator.Options.DEFAULTS)) {
      ClusterCoordinator coordinator = job.coordinator();
      coordinator.variables().create("on_ps0", new long[] {1}, Optimizer.NONE);
      coordinator.variables().create("x", new long[] {1}, Optimizer.NONE);
      assertEquals(ps1, coordinator.variables().variable("x").shards().get(0).ps());
      for (int i = 0; i < 20; i++) {
        coordinator.schedule("read", Value.of("x"));
      }
      coordinator.join();

      job.kill(ps1);
      long killed = System.nanoTime();
      ParameterServerUnavailableException e = assertThrows(ParameterServerUnavailableException.class, () -> {
        while (System.nanoTime() - killed < Duration.ofSeconds(60).toNanos()) {
          coordinator.schedule("read", Value.of("x"));
          coordinator.join();
        }
      });
      Duration noticed = Duration.ofNanos(System.nanoTime() - killed);
      assertEquals(ps1, e.ps());
      assertTrue(e.getMessage().startsWith("parameter server ps 1 at " + job.cluster().taskAddress(ps1) + " failed"),
          e.getMessage());
      assertTrue(noticed.compareTo(HEARTBEAT_TIMEOUT.plusSeconds(5)) < 0,
          "the coordinator raised " + noticed.toMillis() + " ms after the kill");
      assertThrows(ParameterServerUnavailableException.class, coordinator::join, "a lost ps stays fatal");
    }
  }
}
