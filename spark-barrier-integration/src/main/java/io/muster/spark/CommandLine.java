package io.muster.spark;

import io.muster.launch.TaskProcess;
import java.io.Serializable;

/**
 * One line an external command printed, as the driver receives it.
 *
 * @param task {@code worker 2}
 * @param stream which of the command's streams it came from
 */
public record CommandLine(String task, TaskProcess.Stream stream, String text) implements Serializable {
  @Override
  public String toString() {
    return "[" + task + "] " + text;
  }
}
