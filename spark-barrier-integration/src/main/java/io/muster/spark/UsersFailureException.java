package io.muster.spark;

/**
 * A task failed through the user's own code (the train function threw, or the command exited
 * with a code of its own): a re-run would fail the same way, so the driver does not retry it. Its
 * class name travels in Spark's failure message, and in the abort reason the other tasks' errors
 * quote, which is how the driver recognises it whichever task's failure Spark reports first.
 */
final class UsersFailureException extends RuntimeException {
  private static final long serialVersionUID = 1L;

  UsersFailureException(String message, Throwable cause) {
    super(message, cause);
  }

  UsersFailureException(String message) {
    super(message);
  }

  /** Whether {@code failure}, as the driver got it from Spark, is (or reports) one of these. */
  static boolean isIn(Throwable failure) {
    for (Throwable t = failure; t != null; t = t.getCause()) {
      if (t instanceof UsersFailureException
          || (t.getMessage() != null && t.getMessage().contains(UsersFailureException.class.getName()))) {
        return true;
      }
    }
    return false;
  }
}
