package io.muster.spark;

import io.muster.launch.OnPreemption;
import io.muster.launch.TaskEnvironment;
import java.io.Serializable;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;

/**
 * A training command every task of the gang runs ({@code python3 train.py --epochs 5}), with what
 * it is told. Muster sets {@code TF_CONFIG}, {@code CUDA_VISIBLE_DEVICES}, {@code MUSTER_JOB_TOKEN}
 * and the {@code MUSTER_*} variables (see {@link CommandTask}); the command runs in the executor's
 * working directory (where {@code spark-submit --files} puts files). Immutable; each {@code with}
 * returns a copy.
 */
public final class ExternalCommand implements Serializable {
  private static final long serialVersionUID = 2L;

  private final List<String> command;
  private final Map<String, String> environment;
  private final String outputDir;
  private final int stderrTailLines;
  private final Duration gracePeriod;
  private final Duration failureGracePeriod;
  /** Null for no limit (Optional is not serializable). */
  private final Duration timeout;
  private final OnPreemption onPreemption;

  private ExternalCommand(List<String> command, Map<String, String> environment, String outputDir,
      int stderrTailLines, Duration gracePeriod, Duration failureGracePeriod, Duration timeout,
      OnPreemption onPreemption) {
    this.command = List.copyOf(command);
    this.environment = Map.copyOf(environment);
    this.outputDir = outputDir;
    this.stderrTailLines = stderrTailLines;
    this.gracePeriod = gracePeriod;
    this.failureGracePeriod = failureGracePeriod;
    this.timeout = timeout;
    this.onPreemption = onPreemption;
  }

  /** The program and its arguments, as they are (no shell). */
  public static ExternalCommand of(String... command) {
    return of(List.of(command));
  }

  public static ExternalCommand of(List<String> command) {
    if (command.isEmpty() || command.get(0).isBlank()) {
      throw new IllegalArgumentException("the command is empty; give the program and its arguments, e.g. "
          + "ExternalCommand.of(\"python3\", \"train.py\")");
    }
    return new ExternalCommand(new ArrayList<>(command), Map.of(), null, 30, Duration.ofSeconds(10), Duration.ofSeconds(2),
        null, OnPreemption.TENSORFLOW);
  }

  /** More variables for the command; Muster's own ({@code TF_CONFIG}, {@code MUSTER_*}, CUDA) cannot be set. */
  public ExternalCommand withEnvironment(Map<String, String> variables) {
    for (String name : variables.keySet()) {
      if (TaskEnvironment.isReserved(name)) {
        throw new IllegalArgumentException("the environment variable " + name + " is set by Muster for each task; "
            + "leave it out of withEnvironment");
      }
    }
    Map<String, String> merged = new LinkedHashMap<>(environment);
    merged.putAll(variables);
    return new ExternalCommand(command, merged, outputDir, stderrTailLines, gracePeriod, failureGracePeriod, timeout,
        onPreemption);
  }

  /** Passed as {@code MUSTER_OUTPUT_DIR} (any Hadoop or TensorFlow URI; the command applies the chief rule). */
  public ExternalCommand withOutputDir(String dir) {
    if (dir == null || dir.isBlank()) {
      throw new IllegalArgumentException("the output directory must be a path or URI, was '" + dir + "'");
    }
    return new ExternalCommand(command, environment, dir, stderrTailLines, gracePeriod, failureGracePeriod, timeout,
        onPreemption);
  }

  /** How many of the last stderr lines a failure reports (default 30). */
  public ExternalCommand withStderrTailLines(int lines) {
    if (lines < 0) {
      throw new IllegalArgumentException("stderrTailLines must be >= 0, was " + lines);
    }
    return new ExternalCommand(command, environment, outputDir, lines, gracePeriod, failureGracePeriod, timeout,
        onPreemption);
  }

  /**
   * How long a command has to exit after SIGTERM before SIGKILL when it is ended politely: the
   * untracked tasks at the end of the job, a user's cancel (default 10 s).
   */
  public ExternalCommand withGracePeriod(Duration grace) {
    if (grace.isNegative() || grace.isZero()) {
      throw new IllegalArgumentException("the grace period must be positive, was " + grace);
    }
    return new ExternalCommand(command, environment, outputDir, stderrTailLines, grace, failureGracePeriod, timeout,
        onPreemption);
  }

  /**
   * How long a command has to exit after SIGTERM before SIGKILL when the gang has failed (a peer
   * died, the stage was aborted): default 2 s, since the attempt is lost anyway and TensorFlow
   * ignores SIGTERM.
   */
  public ExternalCommand withFailureGracePeriod(Duration grace) {
    if (grace.isNegative() || grace.isZero()) {
      throw new IllegalArgumentException("the failure grace period must be positive, was " + grace);
    }
    return new ExternalCommand(command, environment, outputDir, stderrTailLines, gracePeriod, grace, timeout,
        onPreemption);
  }

  /** Ends the command, and fails the task, when it runs longer (default: no limit; training takes what it takes). */
  public ExternalCommand withTimeout(Duration timeout) {
    if (timeout.isNegative() || timeout.isZero()) {
      throw new IllegalArgumentException("the timeout must be positive, was " + timeout);
    }
    return new ExternalCommand(command, environment, outputDir, stderrTailLines, gracePeriod, failureGracePeriod, timeout,
        onPreemption);
  }

  /**
   * What a preemption notice does (an executor decommissioned or shutting down, {@link
   * ExecutorNotices}): every command of the gang is sent the signal, and a command that then exits
   * with the saved exit code saved; the gang is re-run without counting the attempt. Default
   * {@link OnPreemption#TENSORFLOW}: SIGTERM and 42, what TensorFlow's
   * {@code PreemptionCheckpointHandler} listens for and exits with.
   */
  public ExternalCommand withPreemption(OnPreemption onPreemption) {
    return new ExternalCommand(command, environment, outputDir, stderrTailLines, gracePeriod, failureGracePeriod,
        timeout, Objects.requireNonNull(onPreemption, "onPreemption"));
  }

  OnPreemption onPreemption() {
    return onPreemption;
  }

  List<String> command() {
    return command;
  }

  Map<String, String> environment() {
    return environment;
  }

  String outputDir() {
    return outputDir;
  }

  int stderrTailLines() {
    return stderrTailLines;
  }

  Duration gracePeriod() {
    return gracePeriod;
  }

  Duration failureGracePeriod() {
    return failureGracePeriod;
  }

  /** Empty when there is no limit. */
  Optional<Duration> timeout() {
    return Optional.ofNullable(timeout);
  }

  /** The command line, cut after 200 characters (a class path would bury the message it appears in). */
  @Override
  public String toString() {
    String line = String.join(" ", command);
    return line.length() <= 200 ? line : line.substring(0, 200) + "…";
  }
}
