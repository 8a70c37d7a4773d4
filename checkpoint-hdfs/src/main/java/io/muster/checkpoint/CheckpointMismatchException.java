package io.muster.checkpoint;

import java.io.IOException;

/**
 * A checkpoint or backup that belongs to another model or run: its variables' names, dtypes or
 * shapes differ from the caller's, or it is past the caller's last epoch. Nothing was restored;
 * the message names the checkpoint and each difference. Retrying cannot help: start the run in
 * another directory, or delete this one.
 */
public final class CheckpointMismatchException extends IOException {
  public CheckpointMismatchException(String message) {
    super(message);
  }
}
