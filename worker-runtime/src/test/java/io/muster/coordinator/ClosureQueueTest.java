package io.muster.coordinator;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.muster.cluster.TaskId;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import org.junit.jupiter.api.Test;

/** The coordinator's closure queue, TensorFlow's {@code _CoordinatedClosureQueue} rules, one literal case each. */
class ClosureQueueTest {
  private static final int WORKER_0 = 0;
  private static final int WORKER_1 = 1;
  /** How long a call the rules say must block is watched before the test takes it for blocked. */
  private static final long BLOCKED_MS = 200;
  /** A hang guard for a call the rules say must return. */
  private static final long RETURNS_MS = 10_000;

  private static Closure closure(long id) {
    return new Closure(id, "step", List.of(), new RemoteValue());
  }

  private static ResourceTask resource(long id) {
    return new ResourceTask(id, "make_iterator", List.of(), new RemoteValue());
  }

  private static void assertBlocked(CompletableFuture<?> call) throws Exception {
    assertThrows(TimeoutException.class, () -> call.get(BLOCKED_MS, TimeUnit.MILLISECONDS));
  }

  private static CompletableFuture<Void> putAsync(ClosureQueue queue, Closure closure) {
    return CompletableFuture.runAsync(() -> {
      try {
        queue.put(closure);
      } catch (InterruptedException e) {
        throw new IllegalStateException(e);
      }
    });
  }

  private static CompletableFuture<Void> awaitIdleAsync(ClosureQueue queue) {
    return CompletableFuture.runAsync(() -> {
      try {
        queue.awaitIdle();
      } catch (InterruptedException e) {
        throw new IllegalStateException(e);
      }
    });
  }

  @Test
  void closuresAreTakenInTheOrderTheyWerePut() throws Exception {
    ClosureQueue queue = new ClosureQueue(0, 2);
    Closure first = closure(1);
    Closure second = closure(2);
    queue.put(first);
    queue.put(second);
    assertSame(first, queue.take(WORKER_1));
    assertSame(second, queue.take(WORKER_0));
  }

  @Test
  void aWorkersOwnResourceTasksComeBeforeAnyClosure() throws Exception {
    ClosureQueue queue = new ClosureQueue(0, 2);
    Closure step = closure(1);
    ResourceTask iterator = resource(2);
    queue.put(step);
    queue.putResourceTask(WORKER_1, iterator);
    assertSame(step, queue.take(WORKER_0), "worker 0 has no resource task of its own");
    queue.put(closure(3));
    assertSame(iterator, queue.take(WORKER_1));
  }

  @Test
  void putBlocksWhileTheQueueIsFullAndGoesOnOnceAClosureIsTaken() throws Exception {
    ClosureQueue queue = new ClosureQueue(1, 1);
    queue.put(closure(1));
    CompletableFuture<Void> second = putAsync(queue, closure(2));
    assertBlocked(second);
    queue.take(WORKER_0);
    second.get(RETURNS_MS, TimeUnit.MILLISECONDS);
  }

  @Test
  void awaitIdleWaitsForTheClosuresInFlight() throws Exception {
    ClosureQueue queue = new ClosureQueue(0, 1);
    queue.put(closure(1));
    queue.take(WORKER_0);
    assertFalse(queue.done(), "one closure in flight");
    CompletableFuture<Void> idle = awaitIdleAsync(queue);
    assertBlocked(idle);
    queue.finished();
    idle.get(RETURNS_MS, TimeUnit.MILLISECONDS);
    assertTrue(queue.done());
  }

  @Test
  void aClosureWhoseWorkerFailedIsPutBackFirstAndItsValueIsAborted() throws Exception {
    ClosureQueue queue = new ClosureQueue(0, 2);
    Closure lost = closure(1);
    Closure next = closure(2);
    queue.put(lost);
    queue.put(next);
    assertSame(lost, queue.take(WORKER_1));
    queue.putBack(lost);
    assertEquals(RemoteValue.Status.ABORTED, lost.output().status());
    assertSame(lost, queue.take(WORKER_0), "the put-back closure runs before the ones queued after it");
  }

  @Test
  void theFirstErrorCancelsEveryQueuedClosureAndIsRaisedOnceByTheNextCall() throws Exception {
    ClosureQueue queue = new ClosureQueue(0, 1);
    Closure failing = closure(1);
    Closure queued = closure(2);
    queue.put(failing);
    queue.put(queued);
    queue.take(WORKER_0);
    RuntimeException error = new RemoteFunctionException("step", new TaskId("worker", 0), "ValueError: bad batch");
    queue.failed(error);

    ClosureCancelledException cancelled = assertThrows(ClosureCancelledException.class, () -> queued.output().fetch());
    assertSame(error, cancelled.getCause());
    assertSame(error, assertThrows(RuntimeException.class, queue::awaitIdle));
    assertTrue(queue.done(), "raised once: the queue goes on");
    queue.put(closure(3));
  }

  @Test
  void theErrorIsRaisedOnlyAfterTheClosuresStillInFlightHaveFinished() throws Exception {
    ClosureQueue queue = new ClosureQueue(0, 2);
    queue.put(closure(1));
    queue.put(closure(2));
    queue.take(WORKER_0);
    queue.take(WORKER_1);
    RuntimeException error = new RemoteFunctionException("step", new TaskId("worker", 0), "ValueError: bad batch");
    queue.failed(error);
    CompletableFuture<Boolean> done = CompletableFuture.supplyAsync(() -> {
      try {
        return queue.done();
      } catch (InterruptedException e) {
        throw new IllegalStateException(e);
      }
    });
    assertBlocked(done);
    queue.finished();
    ExecutionException raised = assertThrows(ExecutionException.class,
        () -> done.get(RETURNS_MS, TimeUnit.MILLISECONDS));
    assertSame(error, raised.getCause());
  }

  @Test
  void aClosurePutBackAfterAnErrorIsCancelledNotRunAgain() throws Exception {
    ClosureQueue queue = new ClosureQueue(0, 2);
    Closure lost = closure(1);
    queue.put(lost);
    queue.put(closure(2));
    queue.take(WORKER_0);
    queue.take(WORKER_1);
    RuntimeException error = new RemoteFunctionException("step", new TaskId("worker", 0), "ValueError: bad batch");
    queue.failed(error);
    queue.putBack(lost);
    assertEquals(RemoteValue.Status.READY, lost.output().status());
    assertSame(error, assertThrows(ClosureCancelledException.class, () -> lost.output().fetch()).getCause());
  }

  @Test
  void aFatalErrorIsRaisedAtOnceByEveryLaterCallAndStopsTheWorkers() throws Exception {
    ClosureQueue queue = new ClosureQueue(1, 1);
    Closure queued = closure(1);
    queue.put(queued);
    CompletableFuture<Void> blockedPut = putAsync(queue, closure(2));
    assertBlocked(blockedPut);
    RuntimeException lostPs = new IllegalStateException("ps 0 was lost");
    queue.fatal(lostPs);

    ExecutionException unblocked = assertThrows(ExecutionException.class,
        () -> blockedPut.get(RETURNS_MS, TimeUnit.MILLISECONDS));
    assertSame(lostPs, unblocked.getCause());
    assertSame(lostPs, assertThrows(ClosureCancelledException.class, () -> queued.output().fetch()).getCause());
    assertNull(queue.take(WORKER_0), "the workers stop");
    assertSame(lostPs, assertThrows(RuntimeException.class, () -> queue.put(closure(3))));
    assertSame(lostPs, assertThrows(RuntimeException.class, queue::awaitIdle));
    assertTrue(queue.isFatal());
  }

  @Test
  void closingStopsTheWorkersCancelsWhatIsQueuedAndRefusesNewClosures() throws Exception {
    ClosureQueue queue = new ClosureQueue(0, 1);
    Closure queued = closure(1);
    queue.put(queued);
    RuntimeException why = new IllegalStateException("the coordinator was closed");
    queue.close(why);
    assertNull(queue.take(WORKER_0));
    assertSame(why, assertThrows(ClosureCancelledException.class, () -> queued.output().fetch()).getCause());
    assertEquals("the cluster coordinator is closed",
        assertThrows(IllegalStateException.class, () -> queue.put(closure(2))).getMessage());
  }
}
