package io.muster.strategy;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.muster.cluster.ClusterConfigException;
import io.muster.cluster.ClusterSpec;
import io.muster.cluster.TaskId;
import io.muster.coordinator.ClosureCancelledException;
import io.muster.coordinator.ClusterCoordinator;
import io.muster.coordinator.PerWorkerValues;
import io.muster.coordinator.RemoteFunctionException;
import io.muster.coordinator.RemoteValue;
import io.muster.coordinator.Value;
import io.muster.ps.Optimizer;
import io.muster.ps.Partitioner;
import io.muster.ps.Variable;
import io.muster.testing.Eventually;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.Semaphore;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** The coordinator's contract on a job of a chief, two workers and two ps tasks, all in this JVM. */
class ParameterServerStrategyTest {

  private static PsJob job(Path dir, ClusterCoordinator.Options options) {
    return PsJob.start(2, 2, Set.of(), dir, options);
  }

  @Test
  void scheduledFunctionsRunOnTheWorkersAndTheirValuesComeBack(@TempDir Path dir) {
    try (PsJob job = job(dir, ClusterCoordinator.Options.DEFAULTS)) {
      ClusterCoordinator coordinator = job.coordinator();
      coordinator.variables().create("count", new long[] {1}, Optimizer.NONE);
      List<RemoteValue> squares = new ArrayList<>();
      for (long i = 0; i < 40; i++) {
        squares.add(coordinator.schedule("square", Value.of(i), Value.of(5L)));
        coordinator.schedule("count");
      }
      coordinator.join();
      assertTrue(coordinator.done());
      Set<Long> workers = new HashSet<>();
      for (int i = 0; i < squares.size(); i++) {
        long[] result = squares.get(i).fetch().longs();
        assertEquals((long) i * i, result[0]);
        workers.add(result[1]);
      }
      assertEquals(Set.of(0L, 1L), workers, "both workers take closures");
      assertEquals(40f, coordinator.variables().variable("count").read()[0]);
    }
  }

  @Test
  void variablesArePlacedRoundRobinAndShardedAsTheStrategyDoes(@TempDir Path dir) {
    try (PsJob job = job(dir, ClusterCoordinator.Options.DEFAULTS)) {
      var variables = job.coordinator().variables();
      Variable a = variables.create("a", new long[] {3}, Optimizer.NONE);
      Variable b = variables.create("b", new long[] {3}, Optimizer.NONE);
      Variable c = variables.create("c", new long[] {13, 2}, null, Optimizer.sgd(0.5f), Partitioner.fixedShards(5));
      assertEquals(new TaskId("ps", 0), a.shards().get(0).ps());
      assertEquals(new TaskId("ps", 1), b.shards().get(0).ps());
      assertEquals(List.of("c/part_0", "c/part_1", "c/part_2", "c/part_3", "c/part_4"),
          c.shards().stream().map(Variable.Shard::name).toList());
      assertEquals(List.of(3L, 3L, 3L, 2L, 2L), c.shards().stream().map(Variable.Shard::rows).toList());
      assertEquals(List.of(0, 1, 0, 1, 0), c.shards().stream().map(s -> s.ps().index()).toList());
      float[] gradient = new float[26];
      java.util.Arrays.fill(gradient, 2f);
      c.applyGradient(gradient);
      float[] expected = new float[26];
      java.util.Arrays.fill(expected, -1f);
      assertArrayEquals(expected, variables.variable("c").read(), "the handle found by name reads the same shards");
    }
  }

  @Test
  void scheduleBlocksWhileTheQueueIsFull(@TempDir Path dir) throws Exception {
    PsJobFunctions.gate = new Semaphore(0);
    try (PsJob job = job(dir, ClusterCoordinator.Options.DEFAULTS.withQueueSize(3))) {
      ClusterCoordinator coordinator = job.coordinator();
      List<RemoteValue> values = new ArrayList<>();
      for (int i = 0; i < 2; i++) {
        values.add(coordinator.schedule("block"));
      }
      // Both workers hold a closure at the gate; three more fill the queue.
      Eventually.within(Duration.ofSeconds(30), "both workers holding a closure", () -> PsJobFunctions.waiting.get() == 2);
      for (int i = 0; i < 3; i++) {
        values.add(coordinator.schedule("block"));
      }
      AtomicReference<RemoteValue> sixth = new AtomicReference<>();
      Thread scheduler = new Thread(() -> sixth.set(coordinator.schedule("block")), "test-scheduler");
      scheduler.start();
      Eventually.within(Duration.ofSeconds(30), "the scheduler blocked", () -> scheduler.getState() == Thread.State.WAITING);
      assertEquals(null, sixth.get(), "the sixth schedule waits for a free slot");
      PsJobFunctions.gate.release(100);
      scheduler.join(30_000);
      assertTrue(sixth.get() != null, "the sixth schedule returns once the queue drains");
      coordinator.join();
      for (RemoteValue v : values) {
        assertEquals(RemoteValue.Status.READY, v.status());
      }
      assertEquals(RemoteValue.Status.READY, sixth.get().status());
    } finally {
      PsJobFunctions.gate = new Semaphore(Integer.MAX_VALUE);
    }
  }

  @Test
  void aUsersErrorIsRaisedOnceAndTheQueuedClosuresAreCancelled(@TempDir Path dir) throws Exception {
    PsJobFunctions.gate = new Semaphore(0);
    try (PsJob job = job(dir, ClusterCoordinator.Options.DEFAULTS)) {
      ClusterCoordinator coordinator = job.coordinator();
      RemoteValue first = coordinator.schedule("block");
      RemoteValue second = coordinator.schedule("block");
      Eventually.within(Duration.ofSeconds(30), "both workers holding a closure", () -> PsJobFunctions.waiting.get() == 2);
      RemoteValue broken = coordinator.schedule("fail_on_3", Value.of(3L));
      List<RemoteValue> queued = new ArrayList<>();
      for (long i = 0; i < 5; i++) {
        queued.add(coordinator.schedule("square", Value.of(i)));
      }
      // One worker goes on and takes the broken closure next; the other still holds its closure.
      PsJobFunctions.gate.release(1);
      Eventually.within(Duration.ofSeconds(30), "the broken closure failed", () -> broken.status() == RemoteValue.Status.READY);
      for (RemoteValue v : queued) {
        assertThrows(ClosureCancelledException.class, v::fetch, "a closure queued behind the error is cancelled");
      }
      PsJobFunctions.gate.release(1);
      RemoteFunctionException raised = assertThrows(RemoteFunctionException.class, coordinator::join);
      assertEquals("fail_on_3", raised.function());
      assertTrue(raised.getMessage().contains("closure 3 is broken"), raised.getMessage());
      assertEquals(RemoteValue.Status.READY, first.status(), "closures in flight finish before the error is raised");
      assertEquals(RemoteValue.Status.READY, second.status());
      assertThrows(RemoteFunctionException.class, broken::fetch);
      coordinator.join(); // raised once: the next join sees no error
      assertTrue(coordinator.done());
      assertEquals(4L, coordinator.schedule("square", Value.of(2L)).fetch().longs()[0], "scheduling works again");
    } finally {
      PsJobFunctions.gate = new Semaphore(Integer.MAX_VALUE);
    }
  }

  @Test
  void perWorkerResourcesLiveOnEachWorker(@TempDir Path dir) {
    try (PsJob job = job(dir, ClusterCoordinator.Options.DEFAULTS)) {
      ClusterCoordinator coordinator = job.coordinator();
      PerWorkerValues counters = coordinator.createPerWorkerResource("counter", Value.of(100L));
      List<RemoteValue> ticks = new ArrayList<>();
      for (int i = 0; i < 30; i++) {
        ticks.add(coordinator.schedule("tick", counters));
      }
      coordinator.join();
      Map<Long, Long> highest = new java.util.HashMap<>();
      int total = 0;
      for (RemoteValue t : ticks) {
        long[] r = t.fetch().longs();
        highest.merge(r[0], r[1], Math::max);
      }
      for (long h : highest.values()) {
        total += h - 100;
      }
      assertEquals(30, total, "each worker counts its own closures on its own resource");
      assertEquals(2, counters.values().size());
      counters.values().forEach(v -> assertEquals(Value.NONE, v.fetch()));
    }
  }

  @Test
  void badSchedulesAreRefusedAtOnce(@TempDir Path dir) {
    try (PsJob job = job(dir, ClusterCoordinator.Options.DEFAULTS)) {
      ClusterCoordinator coordinator = job.coordinator();
      IllegalArgumentException unknown = assertThrows(IllegalArgumentException.class,
          () -> coordinator.schedule("no_such_function"));
      assertTrue(unknown.getMessage().contains("no function no_such_function is registered"), unknown.getMessage());
      RemoteValue v = coordinator.schedule("square", Value.of(3L));
      IllegalArgumentException remote = assertThrows(IllegalArgumentException.class,
          () -> coordinator.schedule("square", v));
      assertTrue(remote.getMessage().contains("a RemoteValue cannot be passed as an argument"), remote.getMessage());
      assertInstanceOf(long[].class, v.fetch().longs());
    }
  }

  @Test
  void aClusterWithoutPsOrWorkersIsRefusedWithTensorFlowsWords() {
    ClusterSpec noPs = ClusterSpec.of(Map.of("chief", List.of("127.0.0.1:1"), "worker", List.of("127.0.0.1:2")));
    ClusterConfigException e = assertThrows(ClusterConfigException.class,
        () -> ParameterServerStrategy.builder().cluster(noPs, new TaskId("chief", 0)).join());
    assertEquals("There must be at least one ps.", e.getMessage());
    ClusterSpec noWorker = ClusterSpec.of(Map.of("chief", List.of("127.0.0.1:1"), "ps", List.of("127.0.0.1:2")));
    e = assertThrows(ClusterConfigException.class,
        () -> ParameterServerStrategy.builder().cluster(noWorker, new TaskId("chief", 0)).join());
    assertEquals("There must be at least one worker.", e.getMessage());
  }
}
