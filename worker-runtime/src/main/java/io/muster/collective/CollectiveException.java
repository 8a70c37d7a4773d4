package io.muster.collective;

/**
 * A collective failed: a peer died or stopped sending, ranks called different collectives, or
 * the group was aborted earlier. Once a group has failed every later call fails at once with the
 * first cause, as TensorFlow's collective executor does; the job must be restarted.
 */
public class CollectiveException extends RuntimeException {
  public CollectiveException(String message, Throwable cause) {
    super(message, cause);
  }
}
