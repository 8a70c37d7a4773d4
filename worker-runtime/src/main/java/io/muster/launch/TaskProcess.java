package io.muster.launch;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStream;
import java.io.InputStreamReader;
import java.io.UncheckedIOException;
import java.nio.charset.CodingErrorAction;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Deque;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.TimeUnit;

/**
 * An external training command ({@code python3 train.py …}) run for one task: its environment set,
 * every line of its stdout and stderr handed to a {@link LineSink}, the last lines of stderr kept
 * for the error when it fails, and the command, with every process it started, ended when this
 * task ends — also when the JVM itself is killed.
 *
 * <p>The command runs under a small {@code /bin/sh} guard that starts it in its own session
 * ({@code setsid}, where the system has it) and holds the read end of a pipe from this JVM; when
 * the pipe closes (by {@link #close()} or because the JVM died) the guard sends SIGTERM to the
 * command's process group and SIGKILL after the grace period. POSIX systems only.
 */
public final class TaskProcess implements AutoCloseable {

  /** Receives every line the command prints, as it prints it. Called from two reader threads. */
  @FunctionalInterface
  public interface LineSink {
    void line(Stream stream, String line);
  }

  public enum Stream { STDOUT, STDERR }

  /** Lines longer than this are cut as they are read (a progress bar without newlines cannot fill the heap). */
  static final int MAX_LINE_CHARS = 8192;

  // $1: grace seconds; the rest: the command. fd 3 is the pipe from the JVM; EOF on it ends the command.
  private static final String GUARD = String.join("\n",
      "grace=$1; shift",
      "exec 3<&0 0</dev/null",
      "if command -v setsid >/dev/null 2>&1; then setsid \"$@\" 3<&- & else \"$@\" 3<&- & fi",
      "child=$!",
      "{ while read -r _ <&3; do :; done",
      "  kill -TERM -\"$child\" \"$child\" 2>/dev/null",
      "  n=0; while kill -0 \"$child\" 2>/dev/null && [ $n -lt $((grace * 10)) ]; do sleep 0.1; n=$((n + 1)); done",
      "  kill -KILL -\"$child\" \"$child\" 2>/dev/null; } &",
      "guard=$!",
      "exec 3<&-",
      "wait \"$child\"; code=$?",
      "kill \"$guard\" 2>/dev/null",
      "kill -TERM -\"$child\" 2>/dev/null", // whatever the command left running in its group
      "exit $code");

  private final Process process;
  private final String name;
  private final Duration grace;
  private final Thread stdout;
  private final Thread stderr;
  private final Deque<String> stderrTail = new ArrayDeque<>();
  private final int tailLines;

  private TaskProcess(Process process, String name, Duration grace, LineSink sink, int tailLines) {
    this.process = process;
    this.name = name;
    this.grace = grace;
    this.tailLines = tailLines;
    this.stdout = pump(process.getInputStream(), Stream.STDOUT, sink);
    this.stderr = pump(process.getErrorStream(), Stream.STDERR, sink);
  }

  /**
   * Starts the command.
   *
   * @param name what errors and thread names call it ({@code worker 2})
   * @param environment added to (and overriding) this JVM's environment
   * @param tailLines how many of the last stderr lines {@link #stderrTail()} keeps
   * @param grace how long the command has to exit after SIGTERM before it is killed
   */
  public static TaskProcess start(String name, List<String> command, Map<String, String> environment,
      Path workingDirectory, LineSink sink, int tailLines, Duration grace) {
    if (command.isEmpty()) {
      throw new IllegalArgumentException(name + ": the command is empty; give the program and its arguments");
    }
    List<String> guarded = new ArrayList<>(List.of("/bin/sh", "-c", GUARD, "muster-guard",
        String.valueOf(Math.max(1, grace.toSeconds()))));
    guarded.addAll(command);
    ProcessBuilder builder = new ProcessBuilder(guarded).directory(workingDirectory.toFile());
    builder.environment().putAll(environment);
    try {
      return new TaskProcess(builder.start(), name, grace, sink, tailLines);
    } catch (IOException e) {
      throw new UncheckedIOException(name + ": cannot start " + command + " in " + workingDirectory + ": "
          + e.getMessage(), e);
    }
  }

  /** The guard's process id; the command is its child. */
  public long pid() {
    return process.pid();
  }

  public boolean isAlive() {
    return process.isAlive();
  }

  /**
   * Waits for the command to exit and for its output to be read to the end.
   *
   * @return the exit code (128 + signal number when a signal ended it), or empty at the deadline
   */
  public Optional<Integer> waitFor(Duration limit) throws InterruptedException {
    if (!process.waitFor(limit.toMillis(), TimeUnit.MILLISECONDS)) {
      return Optional.empty();
    }
    // The readers end at EOF, which follows the exit unless something the command started still
    // holds its output open; the guard has sent that a SIGTERM, so wait only briefly.
    stdout.join(grace.toMillis());
    stderr.join(grace.toMillis());
    return Optional.of(process.exitValue());
  }

  /** The last lines the command wrote to stderr, oldest first. */
  public List<String> stderrTail() {
    synchronized (stderrTail) {
      return List.copyOf(stderrTail);
    }
  }

  /**
   * Ends the command if it still runs: SIGTERM to its process group, SIGKILL after the grace
   * period. Returns once the guard has exited (bounded by the grace period plus a second).
   */
  @Override
  public void close() {
    if (!process.isAlive()) {
      return;
    }
    List<ProcessHandle> started = process.descendants().toList();
    try {
      process.getOutputStream().close(); // EOF on the guard's pipe: it terminates the command
    } catch (IOException ignored) {
      // the guard is gone already
    }
    try {
      if (!process.waitFor(grace.toMillis() + 1000, TimeUnit.MILLISECONDS)) {
        started.forEach(ProcessHandle::destroyForcibly);
        process.destroyForcibly();
      }
    } catch (InterruptedException e) {
      started.forEach(ProcessHandle::destroyForcibly);
      process.destroyForcibly();
      Thread.currentThread().interrupt();
    }
  }

  private Thread pump(InputStream in, Stream stream, LineSink sink) {
    Thread t = new Thread(() -> {
      var decoder = StandardCharsets.UTF_8.newDecoder().onMalformedInput(CodingErrorAction.REPLACE)
          .onUnmappableCharacter(CodingErrorAction.REPLACE);
      try (BufferedReader reader = new BufferedReader(new InputStreamReader(in, decoder))) {
        StringBuilder line = new StringBuilder();
        long cut = 0; // characters of the current line beyond MAX_LINE_CHARS, dropped as they come
        boolean afterCr = false;
        int c;
        while ((c = reader.read()) != -1) {
          if (c == '\n' && afterCr) { // the second half of a \r\n
            afterCr = false;
            continue;
          }
          afterCr = c == '\r';
          if (c == '\n' || c == '\r') {
            deliver(stream, sink, line, cut);
            line.setLength(0);
            cut = 0;
          } else if (line.length() < MAX_LINE_CHARS) {
            line.append((char) c);
          } else {
            cut++;
          }
        }
        if (line.length() > 0 || cut > 0) {
          deliver(stream, sink, line, cut);
        }
      } catch (IOException e) {
        // the pipe broke because the process was killed; nothing more to read
      }
    }, "muster-" + name.replace(' ', '-') + "-" + stream.name().toLowerCase());
    t.setDaemon(true);
    t.start();
    return t;
  }

  private void deliver(Stream stream, LineSink sink, StringBuilder line, long cut) {
    String text = cut == 0 ? line.toString() : line + " …[" + cut + " more characters cut]";
    if (stream == Stream.STDERR && tailLines > 0) {
      synchronized (stderrTail) {
        if (stderrTail.size() == tailLines) {
          stderrTail.removeFirst();
        }
        stderrTail.addLast(text);
      }
    }
    sink.line(stream, text);
  }
}
