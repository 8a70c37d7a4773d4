package io.muster.testing;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.stream.Stream;

/** What a process is doing, from {@code /proc}. */
public final class Pids {
  private Pids() {}

  /** Whether a process still runs; a zombie (exited, not yet reaped by whoever adopted it) does not. */
  public static boolean running(long pid) {
    if (Files.exists(Path.of("/proc/self/stat"))) {
      try {
        return state(Path.of("/proc", Long.toString(pid), "stat")) != 'Z';
      } catch (IOException e) {
        return false; // gone
      }
    }
    return ProcessHandle.of(pid).map(ProcessHandle::isAlive).orElse(false);
  }

  /**
   * Whether every thread of a process is stopped (SIGSTOP): the stop takes effect once one of its
   * threads next runs, and its other threads go on until then.
   */
  public static boolean stopped(long pid) {
    try (Stream<Path> threads = Files.list(Path.of("/proc", Long.toString(pid), "task"))) {
      return threads.allMatch(thread -> {
        try {
          return state(thread.resolve("stat")) == 'T';
        } catch (IOException e) {
          return true; // a thread that ended meanwhile runs nothing
        }
      });
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  /** The state letter of a {@code /proc/.../stat} line: "pid (comm) S ...", the state after the last ')'. */
  private static char state(Path stat) throws IOException {
    String text = Files.readString(stat);
    return text.charAt(text.lastIndexOf(')') + 2);
  }

  /** Reads a pid a test command wrote, waiting until the file has one. */
  public static long read(Path file, java.time.Duration limit) throws IOException {
    Eventually.within(limit, file + " holds a pid", () -> {
      try {
        return Files.exists(file) && Files.readString(file).trim().matches("\\d+");
      } catch (IOException e) {
        return false;
      }
    });
    return Long.parseLong(Files.readString(file).trim());
  }
}
