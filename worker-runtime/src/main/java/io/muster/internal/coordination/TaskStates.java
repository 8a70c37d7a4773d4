package io.muster.internal.coordination;

import io.muster.coordination.TaskState;
import io.muster.proto.coordination.CoordinatedTaskState;

/** {@link TaskState} on the wire: TensorFlow's {@code CoordinatedTaskState}. */
final class TaskStates {

  private TaskStates() {}

  static CoordinatedTaskState toProto(TaskState state) {
    return switch (state) {
      case UNINITIALIZED -> CoordinatedTaskState.TASKSTATE_UNINITIALIZED;
      case DISCONNECTED -> CoordinatedTaskState.TASKSTATE_DISCONNECTED;
      case CONNECTED -> CoordinatedTaskState.TASKSTATE_CONNECTED;
      case ERROR -> CoordinatedTaskState.TASKSTATE_ERROR;
    };
  }

  /** The state a proto names; one this version does not know reads as {@code UNINITIALIZED}. */
  static TaskState fromProto(CoordinatedTaskState state) {
    return switch (state) {
      case TASKSTATE_DISCONNECTED -> TaskState.DISCONNECTED;
      case TASKSTATE_CONNECTED -> TaskState.CONNECTED;
      case TASKSTATE_ERROR -> TaskState.ERROR;
      default -> TaskState.UNINITIALIZED;
    };
  }
}
