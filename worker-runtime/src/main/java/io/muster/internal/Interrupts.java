package io.muster.internal;

/** What a thread does despite its interrupt. */
public final class Interrupts {
  private Interrupts() {}

  /**
   * Runs {@code action} with this thread's interrupt set aside, then sets it again if it was set:
   * for the last words a killed task must still get out (its own bounds limit how long they take),
   * which blocking calls would give up on at once.
   */
  public static void setAsideWhile(Runnable action) {
    boolean interrupted = Thread.interrupted();
    try {
      action.run();
    } finally {
      if (interrupted) {
        Thread.currentThread().interrupt();
      }
    }
  }
}
