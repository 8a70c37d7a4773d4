package io.muster.coordinator;

import io.muster.cluster.TaskId;

/** A scheduled function threw on a worker: the user's error, not the worker's. */
public final class RemoteFunctionException extends RuntimeException {

  private final String function;
  private final TaskId worker;

  RemoteFunctionException(String function, TaskId worker, String error) {
    super("function " + function + " failed on " + worker + ": " + error);
    this.function = function;
    this.worker = worker;
  }

  public String function() {
    return function;
  }

  public TaskId worker() {
    return worker;
  }
}
