package io.muster.spark;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;

import io.muster.cluster.TaskId;
import io.muster.launch.GangSpec;
import io.muster.launch.TaskProcess.Stream;
import io.muster.rpc.JobToken;
import io.muster.testing.Eventually;
import java.io.OutputStream;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/** The driver's log receiver over real sockets on 127.0.0.1. */
class CommandLogsTest {

  @Test
  void linesArriveInOrderFromATaskWithTheTokenAndNotFromAStrangerWithout() throws Exception {
    List<CommandLine> received = new CopyOnWriteArrayList<>();
    JobToken token = JobToken.of("0123456789abcdef0123456789abcdef");
    try (CommandLogs.Receiver receiver = CommandLogs.Receiver.start("127.0.0.1", "127.0.0.1", token, received::add,
        GangSpec.workers(2), 42)) {
      String[] hostPort = receiver.address().split(":");
      try (Socket stranger = new Socket(hostPort[0], Integer.parseInt(hostPort[1]))) {
        OutputStream out = stranger.getOutputStream();
        out.write("not-the-token\nworker 9\tSTDOUT\tinjected\n".getBytes(StandardCharsets.UTF_8));
        out.flush();
      }
      try (CommandLogs.Sender sender = CommandLogs.Sender.connect(receiver.address(), token.value(),
          new TaskId("worker", 1))) {
        sender.line(Stream.STDOUT, "first\twith a tab");
        sender.line(Stream.STDERR, "second");
      }
      Eventually.within(Duration.ofSeconds(10), "both lines arrived", () -> received.size() >= 2);
    }
    assertEquals(List.of(new CommandLine("worker 1", Stream.STDOUT, "first\twith a tab"),
        new CommandLine("worker 1", Stream.STDERR, "second")), received);
  }

  @Test
  void theFirstFailuresStoryReachesTheOtherTasksWordForWordWithItsVerdict() throws Exception {
    String story = "worker 0: `sh -c x` exited with code 3; the last 2 lines of its stderr:\n  C:\\new\\n\ttab\n  end";
    assertEquals(new CommandLogs.GangFailed(story, true), failureTheOthersHear(3, story));
    assertEquals(new CommandLogs.GangFailed("worker 0: killed", false), failureTheOthersHear(137, "worker 0: killed"));
  }

  /** What worker 1 hears from the driver when worker 0's command exits with {@code code}, telling {@code story}. */
  private static CommandLogs.GangFailed failureTheOthersHear(int code, String story) throws Exception {
    JobToken token = JobToken.of("0123456789abcdef0123456789abcdef");
    try (CommandLogs.Receiver receiver = CommandLogs.Receiver.start("127.0.0.1", "127.0.0.1", token, line -> { },
        GangSpec.workers(2), 42);
        CommandLogs.Sender first = CommandLogs.Sender.connect(receiver.address(), token.value(), new TaskId("worker", 0));
        CommandLogs.Sender other = CommandLogs.Sender.connect(receiver.address(), token.value(), new TaskId("worker", 1))) {
      CompletableFuture<CommandLogs.GangFailed> heard = new CompletableFuture<>();
      other.onGangFailure(heard::complete);
      first.exited(code, story);
      return heard.get(10, TimeUnit.SECONDS);
    }
  }

  /**
   * Worker 0's executor is decommissioned: worker 1 hears the notice from the driver; once both
   * commands have exited, both hear the gang left for the preemption, with who saved.
   */
  @Test
  void aNoticeReachesTheWholeGangAndTheExitsAfterItTellWhoSaved() throws Exception {
    assertEquals(new CommandLogs.GangFailed("preemption notice for worker 0 (SIGPWR: decommissioning); every task "
        + "saved (exit code 42)", CommandLogs.Verdict.PREEMPTED), preemptedGang(42));
    assertEquals(new CommandLogs.GangFailed("preemption notice for worker 0 (SIGPWR: decommissioning); saved by "
        + "worker 0; not saved by worker 1 (exit code 1): the next attempt resumes from the last backup",
        CommandLogs.Verdict.PREEMPTED), preemptedGang(1));
  }

  /** What worker 1 hears when worker 0 passes on a notice and exits 42, and worker 1 then exits with {@code code}. */
  private static CommandLogs.GangFailed preemptedGang(int code) throws Exception {
    JobToken token = JobToken.of("0123456789abcdef0123456789abcdef");
    try (CommandLogs.Receiver receiver = CommandLogs.Receiver.start("127.0.0.1", "127.0.0.1", token, line -> { },
        GangSpec.workers(2), 42);
        CommandLogs.Sender noticed = CommandLogs.Sender.connect(receiver.address(), token.value(), new TaskId("worker", 0));
        CommandLogs.Sender other = CommandLogs.Sender.connect(receiver.address(), token.value(), new TaskId("worker", 1))) {
      CompletableFuture<String> notice = new CompletableFuture<>();
      other.onNotice(notice::complete);
      CompletableFuture<CommandLogs.GangFailed> heard = new CompletableFuture<>();
      other.onGangFailure(heard::complete);
      noticed.noticed("SIGPWR: decommissioning");
      assertEquals("preemption notice for worker 0 (SIGPWR: decommissioning)", notice.get(10, TimeUnit.SECONDS));
      noticed.exited(42, "");
      Thread.sleep(200);
      assertFalse(heard.isDone(), "the gang waits for worker 1 to save: " + heard.getNow(null));
      other.exited(code, code == 42 ? "" : "worker 1: failed");
      return heard.get(10, TimeUnit.SECONDS);
    }
  }

  /** A task whose host goes silent (its connection open, nothing arriving): the others hear the gang failed, naming it. */
  @Test
  void aTaskSilentForTenSecondsFailsTheGangRetryablyNamingItsHost() throws Exception {
    JobToken token = JobToken.of("0123456789abcdef0123456789abcdef");
    try (CommandLogs.Receiver receiver = CommandLogs.Receiver.start("127.0.0.1", "127.0.0.1", token, line -> { },
        GangSpec.workers(2), 42);
        CommandLogs.Sender alive = CommandLogs.Sender.connect(receiver.address(), token.value(), new TaskId("worker", 0));
        Socket silent = new Socket()) {
      String[] hostPort = receiver.address().split(":");
      silent.connect(new java.net.InetSocketAddress(hostPort[0], Integer.parseInt(hostPort[1])));
      silent.getOutputStream().write((token.value() + "\nworker 1\n").getBytes(StandardCharsets.UTF_8));
      silent.getOutputStream().flush();
      CompletableFuture<CommandLogs.GangFailed> heard = new CompletableFuture<>();
      alive.onGangFailure(heard::complete);
      CommandLogs.GangFailed failed = heard.get(30, TimeUnit.SECONDS);
      assertEquals(new CommandLogs.GangFailed("worker 1 on localhost (127.0.0.1) went silent: no word from its task for "
          + "10 s (its host is down or cut off from the driver)", false), failed);
    }
  }

  /** The driver's host goes silent: the task ends its command as for a failed gang, saying so. */
  @Test
  void aDriverSilentForFifteenSecondsEndsTheTasksCommand() throws Exception {
    try (java.net.ServerSocket driver = new java.net.ServerSocket(0, 1, java.net.InetAddress.getLoopbackAddress())) {
      String address = "127.0.0.1:" + driver.getLocalPort();
      try (CommandLogs.Sender sender = CommandLogs.Sender.connect(address, "0123456789abcdef0123456789abcdef",
          new TaskId("worker", 1));
          Socket accepted = driver.accept()) { // reads nothing, answers nothing
        CompletableFuture<CommandLogs.GangFailed> heard = new CompletableFuture<>();
        sender.onGangFailure(heard::complete);
        assertEquals(new CommandLogs.GangFailed("the driver at " + address + " went silent: no word for 15 s (this host "
            + "or the driver's is down or cut off)", false), heard.get(30, TimeUnit.SECONDS));
      }
    }
  }
}
