package io.muster.testing;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;

/**
 * A main class run in a child JVM on the test's class path, its output in a file. Closing it
 * kills it (SIGKILL) if it is still running: tests end only the processes they started.
 */
public final class ChildJvm implements AutoCloseable {

  private final Process process;
  private final Path output;
  private final String name;

  private ChildJvm(Process process, Path output, String name) {
    this.process = process;
    this.output = output;
    this.name = name;
  }

  /** The command line that runs {@code main} in a small JVM on the test's class path (for launchers under test). */
  public static List<String> command(String maxHeap, Class<?> main, List<String> args) {
    List<String> command = new ArrayList<>(List.of(Path.of(System.getProperty("java.home"), "bin", "java").toString(),
        "-Xmx" + maxHeap, "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-Xshare:auto",
        "-cp", System.getProperty("java.class.path"), main.getName()));
    command.addAll(args);
    return command;
  }

  public static ChildJvm start(String name, Class<?> main, List<String> args, Map<String, String> env, Path dir) {
    List<String> command = command("128m", main, args);
    try {
      Files.createDirectories(dir);
      Path output = dir.resolve(name + ".log");
      ProcessBuilder builder = new ProcessBuilder(command).redirectErrorStream(true).redirectOutput(output.toFile());
      builder.environment().remove("TF_CONFIG");
      builder.environment().remove("MUSTER_JOB_TOKEN");
      builder.environment().putAll(env);
      return new ChildJvm(builder.start(), output, name);
    } catch (IOException e) {
      throw new UncheckedIOException("cannot start child JVM " + name, e);
    }
  }

  public Process process() {
    return process;
  }

  /** Waits for the process to exit and returns its exit code; fails the test past the limit. */
  public int waitFor(Duration limit) {
    try {
      if (!process.waitFor(limit.toMillis(), TimeUnit.MILLISECONDS)) {
        throw new AssertionError(name + " still running after " + limit + "; output:\n" + output());
      }
      return process.exitValue();
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new AssertionError("interrupted waiting for " + name, e);
    }
  }

  /** Waits until the output contains the text; fails the test past the limit or if the process exits first. */
  public void awaitOutput(String text, Duration limit) {
    long deadline = System.nanoTime() + limit.toNanos();
    while (!output().contains(text)) {
      if (!process.isAlive()) {
        throw new AssertionError(name + " exited with " + process.exitValue() + " before printing '" + text
            + "'; output:\n" + output());
      }
      if (System.nanoTime() > deadline) {
        throw new AssertionError(name + " did not print '" + text + "' within " + limit + "; output:\n" + output());
      }
      try {
        Thread.sleep(20);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        throw new AssertionError("interrupted", e);
      }
    }
  }

  /**
   * Waits for a line starting with {@code prefix} and returns the rest of it (a child reports what
   * it bound this way: {@code BOUND 127.0.0.1:40123}); fails the test as {@link #awaitOutput} does.
   */
  public String awaitLine(String prefix, Duration limit) {
    awaitOutput(prefix, limit);
    long deadline = System.nanoTime() + limit.toNanos();
    while (true) {
      // the prefix is out; wait for the end of its line
      java.util.Optional<String> line = output().lines().filter(l -> l.startsWith(prefix)).findFirst()
          .filter(l -> output().contains(l + System.lineSeparator()));
      if (line.isPresent()) {
        return line.get().substring(prefix.length());
      }
      if (System.nanoTime() > deadline) {
        throw new AssertionError(name + " did not finish its '" + prefix + "' line within " + limit + "; output:\n" + output());
      }
      try {
        Thread.sleep(20);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        throw new AssertionError("interrupted", e);
      }
    }
  }

  /** Writes one line to the child's standard input. */
  public void send(String line) {
    try {
      process.getOutputStream().write((line + "\n").getBytes(StandardCharsets.UTF_8));
      process.getOutputStream().flush();
    } catch (IOException e) {
      throw new UncheckedIOException("cannot write to " + name + "'s standard input", e);
    }
  }

  public String output() {
    try {
      return Files.exists(output) ? Files.readString(output, StandardCharsets.UTF_8) : "";
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  /** SIGKILL, as a crash or a preemption would end it. */
  public void kill() {
    process.destroyForcibly();
    try {
      process.waitFor(10, TimeUnit.SECONDS);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }

  @Override
  public void close() {
    if (process.isAlive()) {
      kill();
    }
  }
}
