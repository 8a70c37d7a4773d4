package io.muster.launch;

import java.io.Serializable;
import java.time.Duration;

/**
 * What a launcher does with a preemption notice for a gang of external commands (YARN's preemption
 * message, Spark decommissioning an executor): every command it reaches is sent {@code signal} (to
 * its whole process group), and a command that then exits with {@code savedExitCode} saved for the
 * preemption. The attempt does not count against the job's attempts, whatever the exit codes.
 */
public record OnPreemption(String signal, int savedExitCode) implements Serializable {
  /** What TensorFlow's {@code PreemptionCheckpointHandler} does by default: saves on SIGTERM, then exits with 42. */
  public static final OnPreemption TENSORFLOW = new OnPreemption("TERM", 42);
  /**
   * How long, after a command saved, the others have to save and exit by themselves: TensorFlow's
   * chief, which hosts its coordination service, leaves seconds after its workers.
   */
  public static final Duration SAVED_PEERS_WAIT = Duration.ofSeconds(15);

  public OnPreemption {
    signal = TaskProcess.signalName(signal);
    if (savedExitCode < 1 || savedExitCode > 125) {
      throw new IllegalArgumentException("the exit code that says a command saved for preemption must be 1 to 125 "
          + "(0 is success; above 125 the shell's own codes), was " + savedExitCode);
    }
  }
}
