package io.muster.cli;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeFalse;

import io.muster.testing.ChildJvm;
import io.muster.testing.Eventually;
import io.muster.testing.Pids;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.stream.Stream;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * {@code muster submit --local} ended while its job runs, by Ctrl-C (SIGINT) or by SIGKILL: within
 * seconds no process of the job (master, executors, commands) is left, and neither is the local
 * cluster's directory.
 */
class SubmitLocalEndsTest {

  private static final Duration LIMIT = Duration.ofMinutes(3);

  @ParameterizedTest(name = "SIG{0}")
  @ValueSource(strings = {"INT", "KILL"})
  void anEndedSubmitLocalLeavesNoProcessAndNoDirectory(String signal, @TempDir Path tmp) throws Exception {
    assumeFalse(signal.equals("INT") && ignoresSigint(), "this process tree ignores SIGINT (the suite runs as a "
        + "background job of a non-interactive shell), and the JVM keeps an inherited ignore, so muster submit "
        + "cannot receive a Ctrl-C here; run the suite in the foreground");
    Path temp = Files.createDirectories(tmp.resolve("tmp"));
    List<String> command = new ArrayList<>(ChildJvm.command("1g", Muster.class, List.of("submit", "--local",
        "--worker-instances", "2", "--worker-memory", "256m", "--gang-timeout", "2m",
        "--command", "echo $$ > " + tmp + "/pid-$MUSTER_TASK_INDEX; exec sleep 600")));
    command.add(1, "-Djava.io.tmpdir=" + temp);
    // the module openings Hadoop's in-process cluster needs, as the test JVM has them (and ./muster gives them)
    java.lang.management.ManagementFactory.getRuntimeMXBean().getInputArguments().stream()
        .filter(a -> a.startsWith("--add-opens") || a.startsWith("--add-exports")).forEach(a -> command.add(1, a));
    Process submit = new ProcessBuilder(command).redirectErrorStream(true)
        .redirectOutput(tmp.resolve("submit.log").toFile()).start();
    try {
      List<Long> commands = new ArrayList<>();
      Path log = tmp.resolve("submit.log");
      for (int i = 0; i < 2; i++) {
        Path pid = tmp.resolve("pid-" + i);
        Eventually.within(LIMIT, "worker " + i + "'s command runs", () -> {
          assertTrue(submit.isAlive(), () -> "muster submit ended: " + read(log));
          return Files.exists(pid) && !read(pid).isBlank();
        });
        commands.add(Pids.read(pid, LIMIT));
      }
      Path cluster = only(temp);
      assertTrue(cluster.getFileName().toString().startsWith("muster-local-yarn-"), cluster.toString());
      List<Long> inside = runningIn(cluster);
      assertTrue(inside.size() >= 3, "the master and two executors run in the cluster's directory: " + inside);

      new ProcessBuilder("kill", "-s", signal, String.valueOf(submit.pid())).inheritIO().start().waitFor();
      int code = submit.waitFor();
      assertEquals(signal.equals("INT") ? 130 : 137, code, Files.readString(tmp.resolve("submit.log")));
      Eventually.within(Duration.ofSeconds(30), "every process of the job ended and " + cluster + " is gone",
          () -> commands.stream().noneMatch(Pids::running) && inside.stream().noneMatch(Pids::running)
              && !Files.exists(cluster));
      try (Stream<Path> left = Files.list(temp)) {
        assertEquals(List.of(), left.toList(), "nothing is left in the temporary directory");
      }
    } finally {
      submit.destroyForcibly().waitFor();
    }
  }

  /** Whether this process ignores SIGINT, which its children then inherit ({@code SigIgn} in /proc, bit 2). */
  private static boolean ignoresSigint() throws IOException {
    Path status = Path.of("/proc/self/status");
    if (!Files.exists(status)) {
      return false;
    }
    return Files.readAllLines(status).stream().filter(l -> l.startsWith("SigIgn:"))
        .anyMatch(l -> (Long.parseUnsignedLong(l.substring("SigIgn:".length()).strip(), 16) & 0x2) != 0);
  }

  /** {@code yarn-local}'s documented way to stop (Ctrl-C; here SIGTERM, which a background child cannot ignore). */
  @org.junit.jupiter.api.Test
  void yarnLocalStopsOnASignalInOneLineWithoutAStackTrace(@TempDir Path tmp) throws Exception {
    List<String> command = new ArrayList<>(ChildJvm.command("1g", Muster.class, List.of("yarn-local", "--dir",
        tmp.resolve("cluster").toString())));
    java.lang.management.ManagementFactory.getRuntimeMXBean().getInputArguments().stream()
        .filter(a -> a.startsWith("--add-opens") || a.startsWith("--add-exports")).forEach(a -> command.add(1, a));
    Path log = tmp.resolve("yarn-local.log");
    Process local = new ProcessBuilder(command).redirectErrorStream(true).redirectOutput(log.toFile()).start();
    try {
      Eventually.within(LIMIT, "yarn-local is running", () -> {
        assertTrue(local.isAlive(), () -> "yarn-local ended: " + read(log));
        return read(log).contains("muster yarn-local: running;");
      });
      new ProcessBuilder("kill", "-s", "TERM", String.valueOf(local.pid())).inheritIO().start().waitFor();
      assertEquals(0, local.waitFor(), read(log));
      String printed = read(log);
      assertTrue(printed.endsWith("muster yarn-local: stopped; its files stay in " + tmp.resolve("cluster") + "\n"),
          printed);
      assertTrue(printed.lines().noneMatch(l -> l.startsWith("Exception in thread") || l.startsWith("\tat ")), printed);
    } finally {
      local.destroyForcibly().waitFor();
    }
  }

  private static String read(Path file) {
    try {
      return Files.readString(file);
    } catch (IOException e) {
      return e.toString();
    }
  }

  private static Path only(Path dir) throws IOException {
    try (Stream<Path> entries = Files.list(dir)) {
      List<Path> all = entries.filter(p -> p.getFileName().toString().startsWith("muster-local-yarn-")).toList();
      assertEquals(1, all.size(), "one local cluster directory: " + all);
      return all.get(0).toRealPath();
    }
  }

  /** The processes whose working directory lies in {@code dir}. */
  private static List<Long> runningIn(Path dir) throws IOException {
    List<Long> pids = new ArrayList<>();
    try (Stream<Path> procs = Files.list(Path.of("/proc"))) {
      for (Path proc : procs.filter(p -> p.getFileName().toString().matches("\\d+")).toList()) {
        try {
          if (Files.readSymbolicLink(proc.resolve("cwd")).startsWith(dir)) {
            pids.add(Long.parseLong(proc.getFileName().toString()));
          }
        } catch (IOException e) {
          // ended meanwhile, or not ours to read
        }
      }
    }
    assertFalse(pids.isEmpty(), "no process runs in " + dir);
    return pids;
  }
}
