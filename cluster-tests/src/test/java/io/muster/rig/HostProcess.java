package io.muster.rig;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.regex.Pattern;

/** A process started on an emulated host, with its output in two files. Closing it kills it. */
public final class HostProcess implements AutoCloseable {

  private static final int TAIL_LINES = 30;

  private final Host host;
  private final String name;
  private final Process process;
  private final Path out;
  private final Path err;

  HostProcess(Host host, String name, Process process, Path out, Path err) {
    this.host = host;
    this.name = name;
    this.process = process;
    this.out = out;
    this.err = err;
  }

  public long pid() {
    return process.pid();
  }

  public boolean isAlive() {
    return process.isAlive();
  }

  public List<String> stdout() {
    return read(out).lines().toList();
  }

  public List<String> stderr() {
    return read(err).lines().toList();
  }

  /**
   * Waits until a line of stdout or stderr matches {@code line} ({@code what} says what that means,
   * for the error): fails at once if the process exits first, and after {@code timeout}.
   */
  public void awaitLine(Pattern line, Duration timeout, String what) {
    long deadline = System.nanoTime() + timeout.toNanos();
    while (true) {
      if (stdout().stream().anyMatch(l -> line.matcher(l).find()) || stderr().stream().anyMatch(l -> line.matcher(l).find())) {
        return;
      }
      if (!process.isAlive()) {
        throw new IllegalStateException(this + " exited with " + process.exitValue() + " before " + what + "\n" + tail());
      }
      if (System.nanoTime() > deadline) {
        throw new IllegalStateException(this + ": no " + what + " within " + timeout + "\n" + tail());
      }
      sleep(Duration.ofMillis(200));
    }
  }

  /** Waits for the process to exit and returns its exit code; fails, killing it, after {@code timeout}. */
  public int waitFor(Duration timeout) {
    try {
      if (!process.waitFor(timeout.toMillis(), TimeUnit.MILLISECONDS)) {
        String tail = tail();
        close();
        throw new IllegalStateException(this + " still running after " + timeout + "; killed\n" + tail);
      }
      return process.exitValue();
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new IllegalStateException("interrupted waiting for " + this, e);
    }
  }

  /** The last lines of stdout and stderr, for an error message. */
  public String tail() {
    List<String> o = stdout();
    List<String> e = stderr();
    return "-- " + out + " (last lines):\n" + String.join("\n", o.subList(Math.max(0, o.size() - TAIL_LINES), o.size()))
        + "\n-- " + err + " (last lines):\n" + String.join("\n", e.subList(Math.max(0, e.size() - TAIL_LINES), e.size()));
  }

  @Override
  public void close() {
    process.destroyForcibly();
    try {
      process.waitFor(10, TimeUnit.SECONDS);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }

  @Override
  public String toString() {
    return name + " on " + host.name() + " (pid " + process.pid() + ")";
  }

  private static String read(Path file) {
    try {
      return Files.exists(file) ? new String(Files.readAllBytes(file), StandardCharsets.UTF_8) : "";
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  static void sleep(Duration d) {
    try {
      Thread.sleep(d.toMillis());
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new IllegalStateException("interrupted", e);
    }
  }
}
