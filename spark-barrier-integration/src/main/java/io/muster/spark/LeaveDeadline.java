package io.muster.spark;

import io.muster.cluster.TaskId;
import java.time.Duration;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * How long a train function may go on once its gang has failed: {@link #GRACE}, then its thread
 * is interrupted, and again every {@link #AGAIN} until it returns. The function unwinds by closing
 * what it opened, and each close can block for long on a host that went silent (an HDFS file
 * whose pipeline holds a cut DataNode waits out the client's socket timeouts, 5-60 s each); an
 * interrupt ends one such wait, so the task leaves, and frees its slot for the re-run, within
 * seconds. What such a close loses belongs to the failed attempt: its epoch is re-run from the
 * backup.
 */
final class LeaveDeadline implements AutoCloseable {

  static final Duration GRACE = Duration.ofSeconds(1);
  private static final Duration AGAIN = Duration.ofMillis(200);
  private static final Logger log = LoggerFactory.getLogger(LeaveDeadline.class);

  private final TaskId task;
  private final Thread trainer;
  private boolean training = true; // guarded by this
  /** Why the gang failed, once this has interrupted the train function for it; guarded by this. */
  private String interruptedFor;

  /** For the train function running on the calling thread. */
  LeaveDeadline(TaskId task) {
    this.task = task;
    this.trainer = Thread.currentThread();
  }

  /** The gang has failed for {@code reason}: the train function has {@link #GRACE} left to return. */
  void gangFailed(String reason) {
    interruptAfter(GRACE, reason);
  }

  private void interruptAfter(Duration delay, String reason) {
    CompletableFuture.delayedExecutor(delay.toMillis(), TimeUnit.MILLISECONDS).execute(() -> interruptIfTraining(reason));
  }

  private synchronized void interruptIfTraining(String reason) {
    if (!training) {
      return;
    }
    if (interruptedFor == null) {
      log.warn("{}: the train function is still running {} s after the gang failed (closing its files?); "
          + "interrupting it", task, GRACE.toSeconds());
      interruptedFor = reason;
    }
    trainer.interrupt();
    interruptAfter(AGAIN, reason); // an interrupt ends one blocking call; the next close may block again
  }

  /**
   * What the train function's {@code thrown} is to the launcher: when this interrupted it, the
   * gang's failure (retried), whatever the interrupt made it throw; otherwise empty.
   */
  synchronized Optional<RetryableException> gangsFailure(Exception thrown) {
    return Optional.ofNullable(interruptedFor).map(reason -> new RetryableException(task
        + " was interrupted " + GRACE.toSeconds() + " s after its gang failed: " + reason, thrown));
  }

  /** The train function has returned or thrown: on its thread, which loses this class's interrupt. */
  @Override
  public synchronized void close() {
    training = false;
    if (interruptedFor != null) {
      Thread.interrupted();
    }
  }
}
