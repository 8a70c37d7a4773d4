package io.muster.ps;

import io.muster.cluster.TaskId;

/** A parameter server did not answer (it died, or the network to it failed): the job's variables are at risk. */
public final class ParameterServerUnavailableException extends RuntimeException {

  private final TaskId ps;

  public ParameterServerUnavailableException(TaskId ps, String message, Throwable cause) {
    super(message, cause);
    this.ps = ps;
  }

  /** The ps task that did not answer. */
  public TaskId ps() {
    return ps;
  }
}
