package io.muster.coordination;

import io.muster.proto.coordination.CoordinatedTaskState;

/** A task's state at the coordination service, as TensorFlow names them. */
public enum TaskState {
  UNINITIALIZED(CoordinatedTaskState.TASKSTATE_UNINITIALIZED),
  DISCONNECTED(CoordinatedTaskState.TASKSTATE_DISCONNECTED),
  CONNECTED(CoordinatedTaskState.TASKSTATE_CONNECTED),
  ERROR(CoordinatedTaskState.TASKSTATE_ERROR);

  private final CoordinatedTaskState proto;

  TaskState(CoordinatedTaskState proto) {
    this.proto = proto;
  }

  CoordinatedTaskState toProto() {
    return proto;
  }

  static TaskState fromProto(CoordinatedTaskState state) {
    for (TaskState s : values()) {
      if (s.proto == state) {
        return s;
      }
    }
    return UNINITIALIZED;
  }
}
