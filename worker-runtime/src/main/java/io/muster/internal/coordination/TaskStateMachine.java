package io.muster.internal.coordination;

import io.muster.coordination.TaskState;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import io.muster.cluster.TaskId;
import java.time.Duration;

/**
 * One coordinated task's state at the coordination service, and the only place it changes. The
 * rules are TensorFlow's:
 *
 * <ul>
 *   <li>{@code DISCONNECTED} (or {@code UNINITIALIZED}) → {@code CONNECTED} on register, with the
 *       task's incarnation; registering again with the same incarnation changes nothing.
 *   <li>{@code CONNECTED} → {@code ERROR} when a register or heartbeat brings another incarnation
 *       (the task restarted), when its heartbeats stop for longer than the timeout, or when an
 *       error is reported for it; a reported error puts a task in {@code ERROR} from any state.
 *   <li>{@code CONNECTED} → {@code DISCONNECTED} on shutdown; shutting down a task in any other
 *       state changes nothing.
 *   <li>{@code ERROR} → {@code DISCONNECTED} on reset, the only way out of {@code ERROR}: a task in
 *       error may not register or send heartbeats until it is reset, and only a task in error may be
 *       reset.
 *   <li>A task of a recoverable job (TensorFlow's {@code recoverable_jobs}: the workers of a
 *       parameter-server job) may come back: registering with a new incarnation connects it again
 *       from {@code CONNECTED} or {@code ERROR}, and a heartbeat from an old incarnation is refused
 *       without failing the task.
 * </ul>
 *
 * <p>{@link #error()} is set exactly while the task is in {@code ERROR}. Not thread-safe: the
 * service calls it under its own lock. Time is the caller's {@link System#nanoTime()}.
 */
final class TaskStateMachine {

  /** What a register call did. */
  enum Registration {
    /** The task was disconnected and is now connected. */
    CONNECTED,
    /** The task was already connected with this incarnation; nothing changed. */
    ALREADY_CONNECTED,
    /** The task was connected with another incarnation: it restarted, and is now in error. */
    RESTARTED,
    /** Refused: the task is in error and must be reset first; nothing changed. */
    REFUSED_IN_ERROR
  }

  /** What a heartbeat did. */
  enum Heartbeat {
    /** Recorded. */
    ACCEPTED,
    /** Refused: the task has not registered (or has shut down); nothing changed. */
    REFUSED_NOT_CONNECTED,
    /** Refused: the task is in error; nothing changed. */
    REFUSED_IN_ERROR,
    /** The heartbeat came from another incarnation: the task restarted, and is now in error. */
    RESTARTED
  }

  private final TaskId id;
  private final String described;
  private final boolean recoverable;
  private TaskState state = TaskState.DISCONNECTED;
  private long incarnation;
  private long lastHeartbeatNanos;
  private StatusRuntimeException error;

  /**
   * @param described the task as error messages name it, with its address
   * @param recoverable whether the task may restart and register again while the job runs
   */
  TaskStateMachine(TaskId id, String described, boolean recoverable) {
    this.id = id;
    this.described = described;
    this.recoverable = recoverable;
  }

  boolean recoverable() {
    return recoverable;
  }

  TaskState state() {
    return state;
  }

  boolean connected() {
    return state == TaskState.CONNECTED;
  }

  /** The incarnation of the last registration; 0 before the first. */
  long incarnation() {
    return incarnation;
  }

  /** Why the task is in {@code ERROR}; null in every other state. */
  StatusRuntimeException error() {
    return error;
  }

  Registration register(long incarnation, long nowNanos) {
    switch (state) {
      case DISCONNECTED, UNINITIALIZED -> {
        state = TaskState.CONNECTED;
        this.incarnation = incarnation;
        lastHeartbeatNanos = nowNanos;
        error = null;
        return Registration.CONNECTED;
      }
      case CONNECTED -> {
        if (this.incarnation == incarnation) {
          return Registration.ALREADY_CONNECTED;
        }
        if (recoverable) {
          return reconnect(incarnation, nowNanos);
        }
        fail(Errors.error(Status.Code.ABORTED, described + " unexpectedly tried to connect with a different "
            + "incarnation. It has likely restarted.", id, false));
        return Registration.RESTARTED;
      }
      default -> {
        return recoverable && this.incarnation != incarnation ? reconnect(incarnation, nowNanos)
            : Registration.REFUSED_IN_ERROR;
      }
    }
  }

  private Registration reconnect(long incarnation, long nowNanos) {
    state = TaskState.CONNECTED;
    this.incarnation = incarnation;
    lastHeartbeatNanos = nowNanos;
    error = null;
    return Registration.CONNECTED;
  }

  Heartbeat heartbeat(long incarnation, long nowNanos) {
    if (state == TaskState.ERROR) {
      return Heartbeat.REFUSED_IN_ERROR;
    }
    if (state != TaskState.CONNECTED) {
      return Heartbeat.REFUSED_NOT_CONNECTED;
    }
    if (this.incarnation != incarnation && recoverable) {
      return Heartbeat.REFUSED_NOT_CONNECTED;
    }
    if (this.incarnation != incarnation) {
      fail(Errors.error(Status.Code.ABORTED, described + " Heartbeat: Incarnation ID mismatch: expecting "
          + Long.toUnsignedString(this.incarnation) + " but got " + Long.toUnsignedString(incarnation)
          + ". The task has restarted.", id, false));
      return Heartbeat.RESTARTED;
    }
    lastHeartbeatNanos = nowNanos;
    return Heartbeat.ACCEPTED;
  }

  /** Whether the task is connected and its last heartbeat (or registration) is older than {@code timeout}. */
  boolean heartbeatOverdue(long nowNanos, Duration timeout) {
    return state == TaskState.CONNECTED && nowNanos - lastHeartbeatNanos > timeout.toNanos();
  }

  /**
   * A task found overdue (see {@link #heartbeatOverdue}) goes to {@code ERROR}, even if it shut down
   * since: the service fails every overdue task of one check in turn, and failing one may end a
   * shutdown barrier another was waiting in.
   */
  void heartbeatTimedOut() {
    fail(Errors.error(Status.Code.UNAVAILABLE, "Task " + described + " heartbeat timeout. This indicates that the "
        + "remote task has failed, got preempted, or crashed unexpectedly. Check the task logs for an earlier error "
        + "to debug further.", id, false));
  }

  /** An error reported for the task puts it in {@code ERROR}, whatever its state. */
  void errorReported(Status.Code code, String message) {
    fail(Errors.error(code, message, id, true));
  }

  /** Shutdown: a connected task disconnects; returns whether it was connected. */
  boolean shutDown() {
    if (state != TaskState.CONNECTED) {
      return false;
    }
    state = TaskState.DISCONNECTED;
    return true;
  }

  /** Reset: a task in error disconnects and may register again; returns false (refused) in any other state. */
  boolean reset() {
    if (state != TaskState.ERROR) {
      return false;
    }
    state = TaskState.DISCONNECTED;
    error = null;
    return true;
  }

  private void fail(StatusRuntimeException why) {
    state = TaskState.ERROR;
    error = why;
  }
}
