package io.muster.testing;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;

/** Whether a process still runs; a zombie (exited, not yet reaped by whoever adopted it) does not. */
public final class Pids {
  private Pids() {}

  public static boolean running(long pid) {
    Path stat = Path.of("/proc", Long.toString(pid), "stat");
    if (Files.exists(Path.of("/proc/self/stat"))) {
      try {
        String text = Files.readString(stat);
        // "pid (comm) S ...": the state follows the last ')'
        return text.charAt(text.lastIndexOf(')') + 2) != 'Z';
      } catch (IOException e) {
        return false; // gone
      }
    }
    return ProcessHandle.of(pid).map(ProcessHandle::isAlive).orElse(false);
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
