package io.muster.spark;

/**
 * Thrown by a train function to have the whole gang re-run (up to {@code maxAttempts}): a failure
 * the function knows to be transient. Any other exception the function throws is taken to be
 * its own (bad data, a bug) and fails the run on the attempt it happened in; see
 * {@link BarrierTrainer} for what is retried.
 */
public class RetryableException extends RuntimeException {
  private static final long serialVersionUID = 1L;

  public RetryableException(String message) {
    super(message);
  }

  public RetryableException(String message, Throwable cause) {
    super(message, cause);
  }
}
