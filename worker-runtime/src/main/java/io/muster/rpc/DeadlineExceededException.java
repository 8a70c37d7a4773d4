package io.muster.rpc;

import java.time.Duration;

/** A wait ran past its deadline. The message names what was awaited and what is still missing. */
public class DeadlineExceededException extends RuntimeException {
  private final Duration deadline;

  public DeadlineExceededException(String message, Duration deadline) {
    super(message);
    this.deadline = deadline;
  }

  public Duration deadline() {
    return deadline;
  }
}
