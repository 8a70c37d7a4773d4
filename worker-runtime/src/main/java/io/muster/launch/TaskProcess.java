package io.muster.launch;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStream;
import java.io.InputStreamReader;
import java.io.OutputStream;
import java.io.UncheckedIOException;
import java.nio.charset.CodingErrorAction;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Deque;
import java.util.List;
import java.util.Locale;
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
 * ({@code setsid}, where the system has it), beside a watcher in a session of its own that holds
 * the read end of a pipe from this JVM; when the pipe closes the watcher sends SIGTERM to the
 * command's process group and SIGKILL after a grace period (also when the JVM's whole process
 * group was killed, as a NodeManager kills a container): {@link #close()} allows the grace period (a polite end: the job is over, or a user
 * cancelled it), {@link #endAfterFailure()} the shorter failure grace period (the gang has failed;
 * TensorFlow ignores SIGTERM, and the others should not wait on it). When the pipe closes because
 * the JVM died, the guard also deletes the task's own directory, if it was given one, once the
 * command has ended: a killed launcher leaves no training data behind. POSIX systems only.
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

  /** What this JVM writes to the guard's pipe before closing it: end politely, or after a failure. */
  private static final String END = "end";
  private static final String FAILED = "failed";
  /** The signals a command may be asked to answer: not KILL or STOP, which it cannot catch. */
  private static final List<String> SIGNALS = List.of("TERM", "INT", "HUP", "QUIT", "USR1", "USR2", "PWR",
      "ALRM", "XCPU");
  /** What this JVM writes to the guard's pipe, with a signal's name, to have it sent to the command's process group. */
  private static final String SIGNAL = "signal ";

  // The watcher, in a session of its own: $1 the command's pid, $2 and $3 the grace and failure grace
  // periods in tenths of a second, $4 the task's own directory ("" for none); fd 3 is the pipe from the
  // JVM: a word on it says why it closes, and EOF without one means the JVM died. Its own session keeps
  // it out of the JVM's process group, which a NodeManager ends with SIGTERM and then SIGKILL when it
  // kills the container (the command, in a session of its own, would be left running). SIGUSR1 from the
  // guard (the command exited by itself) ends it while it only watches; once it is ending the command,
  // nothing but SIGKILL stops it. A line "signal NAME" before then sends NAME to the command's process group.
  private static final String WATCHER = String.join("\n",
      "child=$1; grace=$2; failure_grace=$3; own_dir=$4",
      "trap '' TERM INT HUP",
      "trap 'exit 0' USR1",
      "word=; while read -r line <&3; do",
      "  case $line in '" + SIGNAL + "'*) kill -\"${line#'" + SIGNAL + "'}\" -\"$child\" 2>/dev/null;; *) word=$line;; esac",
      "done",
      "trap '' USR1",
      "if [ \"$word\" = " + FAILED + " ]; then grace=$failure_grace; fi",
      "kill -TERM -\"$child\" \"$child\" 2>/dev/null",
      "n=0; while kill -0 \"$child\" 2>/dev/null && [ $n -lt \"$grace\" ]; do sleep 0.1; n=$((n + 1)); done",
      "kill -KILL -\"$child\" \"$child\" 2>/dev/null",
      "if [ -z \"$word\" ] && [ -n \"$own_dir\" ]; then",
      "  n=0; while kill -0 \"$child\" 2>/dev/null && [ $n -lt 50 ]; do sleep 0.1; n=$((n + 1)); done",
      "  rm -rf \"$own_dir\"",
      "fi");

  // $1: the watcher's script; $2, $3: the grace periods; $4: the task's own directory; the rest: the command.
  private static final String GUARD = String.join("\n",
      "watcher=$1; grace=$2; failure_grace=$3; own_dir=$4; shift 4",
      // The command's stderr is fd 4; the shell's own messages ("Terminated" for a job it ended) go nowhere.
      "exec 3<&0 0</dev/null 4>&2 2>/dev/null",
      "own_session=; if command -v setsid >/dev/null 2>&1; then own_session=setsid; fi",
      "$own_session \"$@\" 3<&- 2>&4 4>&- &",
      "child=$!",
      "$own_session /bin/sh -c \"$watcher\" muster-watch \"$child\" \"$grace\" \"$failure_grace\" \"$own_dir\" >/dev/null 4>&- &",
      "watcher_pid=$!",
      "exec 3<&-",
      "wait \"$child\"; code=$?",
      "kill -USR1 \"$watcher_pid\" 2>/dev/null",
      "kill -TERM -\"$child\" 2>/dev/null", // whatever the command left running in its group
      // the JVM died while the command was exiting by itself: the watcher may not have got to it
      "if [ -n \"$own_dir\" ] && ! kill -0 \"$PPID\" 2>/dev/null; then rm -rf \"$own_dir\"; fi",
      "exit $code");

  private final Process process;
  private final String name;
  private final Duration grace;
  private final Duration failureGrace;
  private final Thread stdout;
  private final Thread stderr;
  private final Deque<String> stderrTail = new ArrayDeque<>();
  private final int tailLines;

  private TaskProcess(Process process, String name, Duration grace, Duration failureGrace, LineSink sink,
      int tailLines) {
    this.process = process;
    this.name = name;
    this.grace = grace;
    this.failureGrace = failureGrace;
    this.tailLines = tailLines;
    this.stdout = pump(process.getInputStream(), Stream.STDOUT, sink);
    this.stderr = pump(process.getErrorStream(), Stream.STDERR, sink);
  }

  /**
   * Starts the command; its grace period after a failure is the same as for a polite end, and it
   * has no directory of its own for the guard to delete.
   *
   * @param name what errors and thread names call it ({@code worker 2})
   * @param environment added to (and overriding) this JVM's environment
   * @param tailLines how many of the last stderr lines {@link #stderrTail()} keeps
   * @param grace how long the command has to exit after SIGTERM before it is killed
   */
  public static TaskProcess start(String name, List<String> command, Map<String, String> environment,
      Path workingDirectory, LineSink sink, int tailLines, Duration grace) {
    return start(name, command, environment, workingDirectory, sink, tailLines, grace, grace, Optional.empty());
  }

  /**
   * Starts the command.
   *
   * @param grace how long the command has to exit after SIGTERM, on {@link #close()}
   * @param failureGrace the same, on {@link #endAfterFailure()}
   * @param ownDirectory the task's own directory (its data, its result file), which the guard deletes
   *     after ending the command when this JVM dies; the caller deletes it otherwise
   */
  public static TaskProcess start(String name, List<String> command, Map<String, String> environment,
      Path workingDirectory, LineSink sink, int tailLines, Duration grace, Duration failureGrace,
      Optional<Path> ownDirectory) {
    if (command.isEmpty()) {
      throw new IllegalArgumentException(name + ": the command is empty; give the program and its arguments");
    }
    List<String> guarded = new ArrayList<>(List.of("/bin/sh", "-c", GUARD, "muster-guard", WATCHER, tenths(grace),
        tenths(failureGrace), ownDirectory.map(d -> d.toAbsolutePath().toString()).orElse("")));
    guarded.addAll(command);
    ProcessBuilder builder = new ProcessBuilder(guarded).directory(workingDirectory.toFile());
    builder.environment().putAll(environment);
    try {
      return new TaskProcess(builder.start(), name, grace, failureGrace, sink, tailLines);
    } catch (IOException e) {
      throw new UncheckedIOException(name + ": cannot start " + command + " in " + workingDirectory + ": "
          + e.getMessage(), e);
    }
  }

  private static String tenths(Duration d) {
    return String.valueOf(Math.max(1, (d.toMillis() + 99) / 100));
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
   * How a command ended, in the words every launcher uses: its exit code, what the code means where
   * the shell gives it one (126, 127, a signal), and {@link #stderrStory the tail of its stderr}.
   */
  public static String exitStory(int code, List<String> stderrTail) {
    String meaning = code == 126 ? " (found but not executable)" : code == 127 ? " (command not found)"
        : code > 128 && code < 160 ? " (killed by signal " + (code - 128) + ")" : "";
    return "exited with code " + code + meaning + stderrStory(stderrTail);
  }

  /** {@code ; the last 2 lines of its stderr:} and the lines, indented; or that it wrote nothing there. */
  public static String stderrStory(List<String> stderrTail) {
    return stderrTail.isEmpty() ? "; it wrote nothing to stderr"
        : (stderrTail.size() == 1 ? "; the last line of its stderr:" : "; the last " + stderrTail.size()
            + " lines of its stderr:") + "\n  " + String.join("\n  ", stderrTail);
  }

  /**
   * Sends {@code signal} ({@code TERM}, {@code SIGUSR1}) to the command's process group, as a
   * terminal sends Ctrl-C to its foreground job, and returns: the command decides what it means (a
   * preemption notice, for one). A {@code /bin/sh -c} wrapper gets it too, and dies of it unless it
   * traps it: {@code trap exit TERM; python3 train.py} leaves its child to answer, then exits with
   * the child's code.
   *
   * @throws IllegalArgumentException when {@code signal} is not a signal's name
   */
  public void signal(String signal) {
    String name = signalName(signal);
    if (!process.isAlive()) {
      return;
    }
    OutputStream pipe = process.getOutputStream();
    try {
      synchronized (pipe) {
        pipe.write((SIGNAL + name + "\n").getBytes(StandardCharsets.US_ASCII));
        pipe.flush();
      }
    } catch (IOException ignored) {
      // the guard is gone already: so is the command
    }
  }

  /** {@code TERM} for {@code TERM}, {@code SIGTERM} and {@code sigterm}; the shell's names, without SIG. */
  public static String signalName(String signal) {
    String name = signal.strip().toUpperCase(Locale.ROOT);
    name = name.startsWith("SIG") ? name.substring(3) : name;
    if (!SIGNALS.contains(name)) {
      throw new IllegalArgumentException("'" + signal + "' is not a signal a command can be sent to save and leave; "
          + "use one of " + String.join(", ", SIGNALS));
    }
    return name;
  }

  /**
   * Ends the command if it still runs: SIGTERM to its process group, SIGKILL after the grace
   * period. Returns once the guard has exited (bounded by the grace period plus a second).
   */
  @Override
  public void close() {
    end(END, grace);
  }

  /**
   * Ends the command because the gang has failed: as {@link #close()}, with the failure grace
   * period between SIGTERM and SIGKILL.
   */
  public void endAfterFailure() {
    end(FAILED, failureGrace);
  }

  private void end(String word, Duration wait) {
    if (!process.isAlive()) {
      return;
    }
    List<ProcessHandle> started = process.descendants().toList();
    OutputStream pipe = process.getOutputStream();
    try { // EOF on the guard's pipe: it terminates the command
      synchronized (pipe) {
        pipe.write((word + "\n").getBytes(StandardCharsets.US_ASCII));
        pipe.close();
      }
    } catch (IOException ignored) {
      // the guard is gone already
    }
    try {
      if (!process.waitFor(wait.toMillis() + 1000, TimeUnit.MILLISECONDS)) {
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
