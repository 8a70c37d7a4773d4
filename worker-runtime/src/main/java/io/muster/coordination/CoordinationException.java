package io.muster.coordination;

import io.grpc.Status;
import io.muster.cluster.TaskId;
import java.util.Optional;

/**
 * An error from the coordination service or about it: a failed task, a failed barrier, a refused
 * call. {@link #code()} is the gRPC status code TensorFlow uses for the same condition, and
 * {@link #sourceTask()} the task the error started at, when known.
 */
public class CoordinationException extends RuntimeException {
  private final Status.Code code;
  private final TaskId sourceTask;

  public CoordinationException(Status.Code code, String message, TaskId sourceTask, Throwable cause) {
    super(code + ": " + message, cause);
    this.code = code;
    this.sourceTask = sourceTask;
  }

  public Status.Code code() {
    return code;
  }

  public Optional<TaskId> sourceTask() {
    return Optional.ofNullable(sourceTask);
  }
}
