package io.muster.coordinator;

import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.Condition;
import java.util.concurrent.locks.ReentrantLock;

/**
 * The coordinator's closures, with TensorFlow's {@code _CoordinatedClosureQueue} rules: {@link #put}
 * blocks while the queue is full; a worker thread {@link #take}s one at a time (its own per-worker
 * resource tasks first); a closure whose worker failed is {@link #putBack put back}; the first
 * closure error cancels every queued closure and is raised once, by the next {@link #put},
 * {@link #awaitIdle} or {@link #done}, after the closures in flight have finished. A fatal error
 * (a lost parameter server) is raised at once by every later call, and stops the workers.
 */
final class ClosureQueue {

  private final int capacity;
  private final ReentrantLock lock = new ReentrantLock();
  private final Condition work = lock.newCondition();
  private final Condition notFull = lock.newCondition();
  private final Condition changed = lock.newCondition();
  private final ArrayDeque<Closure> queue = new ArrayDeque<>();
  private final List<ArrayDeque<ResourceTask>> perWorker = new ArrayList<>();
  private int inflight;
  private RuntimeException error;
  private RuntimeException fatal;
  private boolean closed;

  /** @param capacity the most closures queued at once; 0 or less for no limit */
  ClosureQueue(int capacity, int workers) {
    this.capacity = capacity;
    for (int i = 0; i < workers; i++) {
      perWorker.add(new ArrayDeque<>());
    }
  }

  void put(Closure closure) throws InterruptedException {
    lock.lock();
    try {
      raiseIfError();
      while (capacity > 0 && queue.size() >= capacity && fatal == null && !closed) {
        notFull.await();
      }
      raiseIfError();
      requireOpen();
      queue.add(closure);
      work.signal();
    } finally {
      lock.unlock();
    }
  }

  void putResourceTask(int worker, ResourceTask task) {
    lock.lock();
    try {
      perWorker.get(worker).add(task);
      work.signalAll();
    } finally {
      lock.unlock();
    }
  }

  /** The next work for this worker: its resource tasks first, then a closure; null once closed or failed. */
  Object take(int worker) throws InterruptedException {
    lock.lock();
    try {
      while (true) {
        if (closed || fatal != null) {
          return null;
        }
        ResourceTask task = perWorker.get(worker).poll();
        if (task != null) {
          return task;
        }
        Closure closure = queue.poll();
        if (closure != null) {
          inflight++;
          notFull.signal();
          return closure;
        }
        work.await();
      }
    } finally {
      lock.unlock();
    }
  }

  /** A taken closure completed (with a value, or cancelled). */
  void finished() {
    lock.lock();
    try {
      inflight--;
      changed.signalAll();
    } finally {
      lock.unlock();
    }
  }

  /** The closure's worker failed: it runs again on the next free worker, unless an error cancelled everything. */
  void putBack(Closure closure) {
    lock.lock();
    try {
      inflight--;
      if (error != null || fatal != null) {
        closure.output().fail(new ClosureCancelledException(closure.function(), error != null ? error : fatal));
      } else {
        closure.output().abort();
        queue.addFirst(closure);
        work.signal();
      }
      changed.signalAll();
    } finally {
      lock.unlock();
    }
  }

  /** A taken closure failed with the user's error: recorded (the first only) and every queued closure cancelled. */
  void failed(RuntimeException why) {
    lock.lock();
    try {
      inflight--;
      if (error == null) {
        error = why;
        cancelQueued(why);
      }
      changed.signalAll();
    } finally {
      lock.unlock();
    }
  }

  /** The job cannot go on: every later call raises {@code why} at once. */
  void fatal(RuntimeException why) {
    lock.lock();
    try {
      if (fatal == null) {
        fatal = why;
        cancelQueued(why);
      }
      work.signalAll();
      notFull.signalAll();
      changed.signalAll();
    } finally {
      lock.unlock();
    }
  }

  boolean isFatal() {
    lock.lock();
    try {
      return fatal != null;
    } finally {
      lock.unlock();
    }
  }

  /** Waits until nothing is queued or in flight, then raises a recorded error. */
  void awaitIdle() throws InterruptedException {
    lock.lock();
    try {
      while (fatal == null && error == null && (!queue.isEmpty() || inflight > 0)) {
        changed.await();
      }
      raiseIfError();
    } finally {
      lock.unlock();
    }
  }

  /** Whether nothing is queued or in flight; raises a recorded error first. */
  boolean done() throws InterruptedException {
    lock.lock();
    try {
      raiseIfError();
      return queue.isEmpty() && inflight == 0;
    } finally {
      lock.unlock();
    }
  }

  /** Stops the workers: queued closures are cancelled. */
  void close(RuntimeException why) {
    lock.lock();
    try {
      closed = true;
      cancelQueued(why);
      work.signalAll();
      notFull.signalAll();
      changed.signalAll();
    } finally {
      lock.unlock();
    }
  }

  /** Under the lock: raises the fatal error at once, or the first closure error once nothing is in flight. */
  private void raiseIfError() throws InterruptedException {
    if (fatal != null) {
      throw fatal;
    }
    if (error == null) {
      return;
    }
    while (inflight > 0 && fatal == null) {
      changed.await(100, TimeUnit.MILLISECONDS);
    }
    if (fatal != null) {
      throw fatal;
    }
    RuntimeException raised = error;
    if (raised != null) {
      cancelQueued(raised);
      error = null;
      throw raised;
    }
  }

  private void requireOpen() {
    if (closed) {
      throw new IllegalStateException("the cluster coordinator is closed");
    }
  }

  private void cancelQueued(RuntimeException why) {
    for (Closure c; (c = queue.poll()) != null; ) {
      c.output().fail(new ClosureCancelledException(c.function(), why));
    }
    notFull.signalAll();
  }
}
