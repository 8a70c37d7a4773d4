package io.muster.strategy;

/**
 * The gang saved at the step it agreed on for a {@link Preemption} and this task is leaving: not a
 * failure. A task's main ends with {@link #EXIT_CODE} on it, which launchers read as "saved for
 * preemption; run the gang again to resume", as TensorFlow's handler exits.
 */
public final class PreemptedException extends RuntimeException {

  /** TensorFlow's {@code PreemptionCheckpointHandler} exit code for a task that saved and left. */
  public static final int EXIT_CODE = 42;

  public PreemptedException(String message) {
    super(message);
  }
}
