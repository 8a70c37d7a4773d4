package io.muster.coordination;

/** A task's state at the coordination service, as TensorFlow names them. */
public enum TaskState {
  UNINITIALIZED,
  DISCONNECTED,
  CONNECTED,
  ERROR
}
