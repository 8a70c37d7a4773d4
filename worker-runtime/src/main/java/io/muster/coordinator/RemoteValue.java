package io.muster.coordinator;

import io.muster.internal.Durations;
import io.muster.rpc.DeadlineExceededException;
import java.time.Duration;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;

/**
 * The result of a scheduled function, available once a worker has run it. {@link #fetch} blocks
 * until then and throws what the function threw ({@link RemoteFunctionException}), or
 * {@link ClosureCancelledException} when the closure was cancelled because another failed. A
 * closure whose worker failed is put back and run again, so its value stays not ready until a
 * worker completes it.
 */
public final class RemoteValue {

  public enum Status { NOT_READY, ABORTED, READY }

  private final CountDownLatch ready = new CountDownLatch(1);
  private volatile Status status = Status.NOT_READY;
  private volatile Value value;
  private volatile RuntimeException error;

  public Status status() {
    return status;
  }

  /** Waits for the value; see the class comment for what it throws. */
  public Value fetch() {
    try {
      ready.await();
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new IllegalStateException("interrupted while fetching a remote value", e);
    }
    return result();
  }

  /**
   * Waits up to {@code timeout}.
   *
   * @throws DeadlineExceededException when the value is not ready in time
   */
  public Value fetch(Duration timeout) {
    try {
      if (!ready.await(timeout.toNanos(), TimeUnit.NANOSECONDS)) {
        throw new DeadlineExceededException("remote value not ready within " + Durations.words(timeout) + " (status "
            + status + ")", timeout);
      }
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new IllegalStateException("interrupted while fetching a remote value", e);
    }
    return result();
  }

  private Value result() {
    if (error != null) {
      throw error;
    }
    return value;
  }

  synchronized void set(Value result) {
    if (status != Status.READY) {
      value = result;
      status = Status.READY;
      ready.countDown();
    }
  }

  synchronized void fail(RuntimeException why) {
    if (status != Status.READY) {
      error = why;
      status = Status.READY;
      ready.countDown();
    }
  }

  /** The worker running it failed; it will run again. */
  synchronized void abort() {
    if (status != Status.READY) {
      status = Status.ABORTED;
    }
  }

  @Override
  public String toString() {
    return status == Status.READY ? (error != null ? "failed: " + error.getMessage() : String.valueOf(value))
        : status.toString();
  }
}
