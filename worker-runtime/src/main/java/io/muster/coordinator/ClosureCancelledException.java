package io.muster.coordinator;

/** A queued closure was cancelled because another one failed first (TensorFlow's {@code CancelledError}). */
public final class ClosureCancelledException extends RuntimeException {

  ClosureCancelledException(String function, Throwable cause) {
    super("The corresponding function (" + function + ") is cancelled. Please reschedule the function. Cancelled "
        + "because an earlier closure failed: " + cause.getMessage(), cause);
  }
}
