package io.muster.launch;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.muster.testing.ChildJvm;
import io.muster.testing.Eventually;
import io.muster.testing.Pids;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.CopyOnWriteArrayList;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** Real child processes under the guard: output, exit codes, and that nothing outlives its task. */
class TaskProcessTest {

  private static final Duration LIMIT = Duration.ofSeconds(20);

  @TempDir Path dir;

  private final List<String> lines = new CopyOnWriteArrayList<>();
  private final TaskProcess.LineSink sink = (stream, line) -> lines.add(stream + " " + line);

  private TaskProcess start(String script, Map<String, String> env, Duration grace) {
    return TaskProcess.start("worker 0", List.of("sh", "-c", script), env, dir, sink, 5, grace);
  }

  @Test
  void anExitIsToldWithWhatTheShellMeansByItsCodeAndTheTailOfStderr() {
    assertEquals("exited with code 3; it wrote nothing to stderr", TaskProcess.exitStory(3, List.of()));
    assertEquals("exited with code 3; the last line of its stderr:\n  boom", TaskProcess.exitStory(3, List.of("boom")));
    assertEquals("exited with code 1; the last 2 lines of its stderr:\n  a\n  b",
        TaskProcess.exitStory(1, List.of("a", "b")));
    assertEquals("exited with code 126 (found but not executable); it wrote nothing to stderr",
        TaskProcess.exitStory(126, List.of()));
    assertEquals("exited with code 127 (command not found); it wrote nothing to stderr",
        TaskProcess.exitStory(127, List.of()));
    assertEquals("exited with code 128; it wrote nothing to stderr", TaskProcess.exitStory(128, List.of()));
    assertEquals("exited with code 137 (killed by signal 9); it wrote nothing to stderr",
        TaskProcess.exitStory(137, List.of()));
    assertEquals("exited with code 143 (killed by signal 15); it wrote nothing to stderr",
        TaskProcess.exitStory(143, List.of()));
    assertEquals("exited with code 255; it wrote nothing to stderr", TaskProcess.exitStory(255, List.of()));
    assertEquals("exited with code -102; it wrote nothing to stderr", TaskProcess.exitStory(-102, List.of()));
  }

  @Test
  void everyLineOfBothStreamsReachesTheSinkAndTheExitCodeComesBack() throws Exception {
    try (TaskProcess p = start("echo out1; echo err1 >&2; echo \"FOO=$FOO\"; printf 'no newline'", Map.of("FOO", "bar"),
        Duration.ofSeconds(2))) {
      assertEquals(Optional.of(0), p.waitFor(LIMIT));
    }
    assertTrue(lines.containsAll(List.of("STDOUT out1", "STDERR err1", "STDOUT FOO=bar", "STDOUT no newline")),
        lines.toString());
    assertEquals(4, lines.size(), lines.toString());
  }

  @Test
  void crLfAndCrEndLinesAndAnOverlongLineIsCutAsItIsRead() throws Exception {
    // 3 MB without a newline, then \r\n and \r endings
    try (TaskProcess p = start("head -c 3000000 /dev/zero | tr '\\0' x; printf '\\r\\na\\rb\\n'", Map.of(),
        Duration.ofSeconds(2))) {
      assertEquals(Optional.of(0), p.waitFor(LIMIT));
    }
    assertEquals(3, lines.size(), lines.stream().map(l -> l.substring(0, Math.min(40, l.length()))).toList().toString());
    assertEquals("STDOUT " + "x".repeat(TaskProcess.MAX_LINE_CHARS) + " …[" + (3_000_000 - TaskProcess.MAX_LINE_CHARS)
        + " more characters cut]", lines.get(0));
    assertEquals(List.of("STDOUT a", "STDOUT b"), lines.subList(1, 3));
  }

  @Test
  void aFailingCommandKeepsTheLastLinesOfItsStderr() throws Exception {
    try (TaskProcess p = start("i=1; while [ $i -le 50 ]; do echo \"line $i\" >&2; i=$((i+1)); done; exit 3",
        Map.of(), Duration.ofSeconds(2))) {
      assertEquals(Optional.of(3), p.waitFor(LIMIT));
      assertEquals(List.of("line 46", "line 47", "line 48", "line 49", "line 50"), p.stderrTail());
    }
    assertEquals(50, lines.size());
  }

  @Test
  void aMissingProgramIsAnExitCodeWithTheShellsMessage() throws Exception {
    try (TaskProcess p = TaskProcess.start("worker 1", List.of("no-such-program-muster"), Map.of(), dir, sink, 5,
        Duration.ofSeconds(1))) {
      assertEquals(Optional.of(127), p.waitFor(LIMIT));
      assertTrue(String.join("\n", p.stderrTail()).contains("no-such-program-muster"), p.stderrTail().toString());
    }
  }

  @Test
  void closeEndsTheCommandAndWhatItStarted() throws Exception {
    // try-with-resources: a failed assertion still ends the command (closing twice is harmless)
    try (TaskProcess p = start("sleep 600 & echo $! > grandchild; echo $$ > child; wait", Map.of(),
        Duration.ofSeconds(2))) {
      long child = Pids.read(dir.resolve("child"), LIMIT);
      long grandchild = Pids.read(dir.resolve("grandchild"), LIMIT);
      assertTrue(Pids.running(child) && Pids.running(grandchild));
      p.close();
      Eventually.within(LIMIT, "the command and its sleep ended", () -> !Pids.running(child) && !Pids.running(grandchild));
      assertTrue(!p.isAlive());
    }
  }

  /**
   * A shell that traps the signal with {@code exit} survives it while its child, in the same process
   * group, answers it, then exits with the child's code: the rest of its list does not run.
   */
  @Test
  void aSignalReachesTheCommandsWholeProcessGroupAndTheCommandDecidesWhatItMeans() throws Exception {
    try (TaskProcess p = start("trap exit TERM; sh -c 'trap \"echo saved; exit 42\" TERM; echo $$ > child; "
        + "while true; do sleep 0.1; done'; echo after", Map.of(), Duration.ofSeconds(5))) {
      long child = Pids.read(dir.resolve("child"), LIMIT);
      p.signal("SIGTERM");
      assertEquals(Optional.of(42), p.waitFor(LIMIT), "the child's own exit code, through the shell: " + lines);
      // stdout only: the inner shell may report its killed sleep ("Terminated") on stderr
      assertEquals(List.of("STDOUT saved"), lines.stream().filter(l -> l.startsWith("STDOUT")).toList(),
          "the child answered; the shell's list went no further: " + lines);
      assertFalse(Pids.running(child));
      p.signal("TERM"); // after the exit: nothing to send it to, and no error
    }
    var bad = assertThrows(IllegalArgumentException.class, () -> TaskProcess.signalName("KILL"));
    assertEquals("'KILL' is not a signal a command can be sent to save and leave; use one of TERM, INT, HUP, QUIT, "
        + "USR1, USR2, PWR, ALRM, XCPU", bad.getMessage());
    assertEquals("USR1", TaskProcess.signalName(" sigusr1"));
  }

  @Test
  void aCommandThatIgnoresSigtermIsKilledAfterTheGracePeriod() throws Exception {
    try (TaskProcess p = start("trap '' TERM; echo $$ > child; while true; do sleep 0.2; done", Map.of(),
        Duration.ofSeconds(1))) {
      long child = Pids.read(dir.resolve("child"), LIMIT);
      long start = System.nanoTime();
      p.close();
      Eventually.within(LIMIT, "the command ignoring SIGTERM was killed", () -> !Pids.running(child));
      Duration took = Duration.ofNanos(System.nanoTime() - start);
      assertTrue(took.compareTo(Duration.ofMillis(900)) > 0, "it had its grace period first: " + took);
    }
  }

  @Test
  void afterAFailureACommandIgnoringSigtermIsKilledAfterTheShortFailureGrace() throws Exception {
    TaskProcess p = TaskProcess.start("worker 0", List.of("sh", "-c",
        "trap '' TERM; echo $$ > child; while true; do sleep 0.1; done"), Map.of(), dir, sink, 5,
        Duration.ofSeconds(10), Duration.ofMillis(500), Optional.empty());
    long child = Pids.read(dir.resolve("child"), LIMIT);
    long start = System.nanoTime();
    p.endAfterFailure();
    Eventually.within(LIMIT, "the command ignoring SIGTERM was killed", () -> !Pids.running(child));
    Duration took = Duration.ofNanos(System.nanoTime() - start);
    assertTrue(took.compareTo(Duration.ofMillis(400)) > 0, "it had its failure grace period first: " + took);
    assertTrue(took.compareTo(Duration.ofSeconds(5)) < 0, "not the 10 s grace of a polite end: " + took);
  }

  @Test
  void theGuardOfAKilledJvmDeletesTheTasksOwnDirectoryAfterEndingTheCommand() throws Exception {
    Path own = dir.resolve("work");
    Files.createDirectories(own.resolve("data"));
    Files.writeString(own.resolve("data").resolve("part-00000-of-00001.tfrecord"), "rows");
    try (ChildJvm jvm = ChildJvm.start("launcher-own-dir", LaunchAndWait.class, List.of(dir.toString(), own.toString()),
        Map.of(), dir)) {
      jvm.awaitOutput("launched", LIMIT);
      long child = Pids.read(dir.resolve("child"), LIMIT);
      jvm.process().destroyForcibly().waitFor();
      Eventually.within(LIMIT, "the command of the SIGKILLed JVM ended", () -> !Pids.running(child));
      Eventually.within(LIMIT, "the task's own directory deleted", () -> !Files.exists(own));
    }
    assertTrue(Files.exists(dir.resolve("child")), "only the task's own directory goes");
  }

  @Test
  void aKilledJvmTakesItsCommandWithIt() throws Exception {
    try (ChildJvm jvm = ChildJvm.start("launcher", LaunchAndWait.class, List.of(dir.toString()), Map.of(), dir)) {
      jvm.awaitOutput("launched", LIMIT);
      long child = Pids.read(dir.resolve("child"), LIMIT);
      assertTrue(Pids.running(child));
      jvm.process().destroyForcibly().waitFor();
      Eventually.within(LIMIT, "the command of the SIGKILLed JVM ended", () -> !Pids.running(child));
    }
  }

  /**
   * A NodeManager kills a container by its process group: SIGTERM, then SIGKILL 250 ms later
   * ({@code DefaultContainerExecutor}). The guard's shells are in that group and go with it; the
   * command, in its own session, is not, and must still be ended (it was left running).
   */
  @Test
  void aJvmWhoseProcessGroupIsKilledAsANodeManagerKillsAContainerTakesItsCommandWithIt() throws Exception {
    List<String> command = new ArrayList<>(List.of("setsid"));
    command.addAll(ChildJvm.command("128m", LaunchAndWait.class, List.of(dir.toString())));
    Process launcher = new ProcessBuilder(command).redirectErrorStream(true)
        .redirectOutput(dir.resolve("group-launcher.log").toFile()).start();
    try {
      long child = Pids.read(dir.resolve("child"), LIMIT);
      long group = launcher.pid(); // setsid made the JVM the leader of its own session and group
      assertTrue(Pids.running(child));
      new ProcessBuilder("kill", "-TERM", "--", "-" + group).start().waitFor();
      Thread.sleep(250);
      new ProcessBuilder("kill", "-KILL", "--", "-" + group).start().waitFor();
      assertTrue(launcher.waitFor(LIMIT.toMillis(), java.util.concurrent.TimeUnit.MILLISECONDS), "the JVM is gone");
      Eventually.within(LIMIT, "the command of the killed process group ended", () -> !Pids.running(child));
    } finally {
      launcher.destroyForcibly();
    }
  }

  /**
   * A JVM that launches a long command and waits; the test kills it with SIGKILL. Arguments: the
   * working directory, and optionally the task's own directory for the guard to delete.
   */
  public static final class LaunchAndWait {
    public static void main(String[] args) throws Exception {
      Path dir = Path.of(args[0]);
      TaskProcess.start("worker 0", List.of("sh", "-c", "echo $$ > child; exec sleep 600"), Map.of(), dir,
          (stream, line) -> { }, 5, Duration.ofSeconds(2), Duration.ofSeconds(2),
          args.length > 1 ? Optional.of(Path.of(args[1])) : Optional.empty());
      Pids.read(dir.resolve("child"), LIMIT);
      System.out.println("launched");
      Thread.sleep(600_000);
    }
  }
}
