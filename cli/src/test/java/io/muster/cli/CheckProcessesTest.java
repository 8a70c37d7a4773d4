package io.muster.cli;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.muster.cluster.ClusterSpec;
import io.muster.cluster.TaskId;
import io.muster.cluster.TfConfig;
import io.muster.testing.ChildJvm;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/** {@code muster check} in four child JVMs sharing one TF_CONFIG cluster on 127.0.0.1. */
class CheckProcessesTest {

  private static final Path LOGS = Path.of("target", "check-logs");

  /**
   * Four workers on 127.0.0.1. {@code muster check} binds the port its TF_CONFIG names, as a
   * TensorFlow server does, so a task that runs needs a port found free and released first (a
   * window no test of a TF_CONFIG-named port can close); a task that never starts gets
   * {@code absent}'s port, which stays bound but never listens, so connecting to it is refused
   * and no other process can take it.
   */
  private static ClusterSpec fourWorkers(Socket absent) throws Exception {
    List<String> addresses = new ArrayList<>();
    for (int i = 0; i < 4; i++) {
      if (i == 3 && absent != null) {
        addresses.add("127.0.0.1:" + absent.getLocalPort());
        continue;
      }
      try (ServerSocket free = new ServerSocket(0)) {
        addresses.add("127.0.0.1:" + free.getLocalPort());
      }
    }
    return ClusterSpec.of(Map.of("worker", addresses));
  }

  private static ClusterSpec fourWorkers() throws Exception {
    return fourWorkers(null);
  }

  /** A port that is bound and never listens. */
  private static Socket boundNotListening() throws Exception {
    Socket socket = new Socket();
    socket.bind(new InetSocketAddress("127.0.0.1", 0));
    return socket;
  }

  private static ChildJvm check(String name, ClusterSpec cluster, int index, String timeout) {
    return check(name, cluster, index, timeout, "check-test-token");
  }

  @Test
  void fourTasksAllJoinAndExitZero() throws Exception {
    ClusterSpec cluster = fourWorkers();
    List<ChildJvm> tasks = new ArrayList<>();
    try {
      for (int i = 0; i < 4; i++) {
        tasks.add(check("all", cluster, i, "60s"));
      }
      for (ChildJvm task : tasks) {
        assertEquals(0, task.waitFor(Duration.ofSeconds(90)), task.output());
        String out = task.output();
        for (int i = 0; i < 4; i++) {
          assertTrue(out.contains(String.format("%-12s %-24s CONNECTED", "worker " + i,
              cluster.taskAddress(new TaskId("worker", i)))), out);
        }
        assertTrue(out.contains("all 4 tasks joined in"), out);
      }
    } finally {
      tasks.forEach(ChildJvm::close);
    }
  }

  @Test
  void withOneTaskNeverStartedTheOthersExitOneNamingIt() throws Exception {
    List<ChildJvm> tasks = new ArrayList<>();
    try (Socket absent = boundNotListening()) {
      ClusterSpec cluster = fourWorkers(absent);
      for (int i = 0; i < 3; i++) {
        tasks.add(check("missing", cluster, i, "5s"));
      }
      String missing = "worker 3 at " + cluster.taskAddress(new TaskId("worker", 3)) + ": connection refused";
      for (ChildJvm task : tasks) {
        assertEquals(1, task.waitFor(Duration.ofSeconds(60)), task.output()); // 60 s: a hang guard
        // Each names the missing task, whether it hit its own deadline or saw the leader give up first.
        assertTrue(task.output().contains(missing), task.output());
        // one line on stderr: "muster check: worker i timed out ..." or, when the leader's own
        // deadline came first, "muster check: ABORTED: worker i failed while waiting ..."
        assertTrue(task.output().lines().anyMatch(l -> l.startsWith("muster check: ") && l.contains(missing)),
            task.output());
      }
    } finally {
      tasks.forEach(ChildJvm::close);
    }
  }

  private static ChildJvm check(String name, ClusterSpec cluster, int index, String timeout, String token) {
    return ChildJvm.start(name + "-worker-" + index, Muster.class, List.of("check", "--timeout", timeout),
        Map.of("TF_CONFIG", TfConfig.of(cluster, new TaskId("worker", index)).toJson(), "MUSTER_JOB_TOKEN", token),
        LOGS);
  }

  private static String lastLine(ChildJvm task) {
    List<String> lines = task.output().lines().toList();
    return lines.isEmpty() ? "" : lines.get(lines.size() - 1);
  }

  @Test
  void aPeerWithAnotherTokenIsNamedByTheLeaderAtOnceNotAfterItsDeadline() throws Exception {
    ClusterSpec cluster = fourWorkers();
    String w1 = cluster.taskAddress(new TaskId("worker", 1));
    try (ChildJvm leader = check("token", cluster, 0, "5m")) {
      leader.awaitOutput("serving on", Duration.ofSeconds(60));
      long start = System.nanoTime();
      try (ChildJvm stranger = check("token", cluster, 1, "5m", "another-token")) {
        assertEquals(1, stranger.waitFor(Duration.ofSeconds(60)), stranger.output());
        assertTrue(lastLine(stranger).startsWith("muster check: UNAUTHENTICATED: worker 1 could not register with "
            + "the coordination leader worker 0 at " + cluster.taskAddress(new TaskId("worker", 0))
            + ": job token does not match"), stranger.output());
      }
      assertEquals(1, leader.waitFor(Duration.ofSeconds(60)), leader.output());
      Duration took = Duration.ofNanos(System.nanoTime() - start);
      assertEquals("muster check: UNAUTHENTICATED: worker 0 cannot complete the cluster: worker 1 at " + w1
          + ": refused: wrong job token (its calls carry a MUSTER_JOB_TOKEN other than this task's; every task of a "
          + "job needs the same)", lastLine(leader));
      assertTrue(took.compareTo(Duration.ofSeconds(60)) < 0, "the leader's deadline is 5 minutes; took " + took);
    }
  }

  /** A plain TCP server on {@code port} that answers every connection with {@code answer} (or nothing) and closes it. */
  private static ServerSocket impostor(int port, byte[] answer) throws Exception {
    ServerSocket server = new ServerSocket(port, 50, java.net.InetAddress.getByName("127.0.0.1"));
    Thread accept = new Thread(() -> {
      while (!server.isClosed()) {
        try (java.net.Socket s = server.accept()) {
          if (answer.length == 0) {
            Thread.sleep(2_000);
          } else {
            s.getOutputStream().write(answer);
            s.getOutputStream().flush();
            s.getInputStream().read(new byte[64]); // as an HTTP/1 server does: it reads the request first
          }
        } catch (Exception e) {
          return;
        }
      }
    }, "impostor-" + port);
    accept.setDaemon(true);
    accept.start();
    return server;
  }

  @Test
  void aLeaderPortHeldByAnHttpServerIsReportedAsNotAMusterTask() throws Exception {
    ClusterSpec cluster = fourWorkers();
    String w0 = cluster.taskAddress(new TaskId("worker", 0));
    try (ServerSocket http = impostor(io.muster.cluster.HostPort.parse(w0).port(),
        "HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n".getBytes(java.nio.charset.StandardCharsets.US_ASCII));
        ChildJvm w1 = check("http", cluster, 1, "60s")) {
      assertEquals(1, w1.waitFor(Duration.ofSeconds(60)), w1.output());
      assertEquals("muster check: worker 1 cannot register with the coordination leader worker 0: its address " + w0
          + " is held by a program that is not a Muster task: it answered 'HTTP/1.1 400 Bad Request' to gRPC's "
          + "HTTP/2 greeting", lastLine(w1));
    }
  }

  @Test
  void aPeerPortHeldBySomethingSilentIsReportedAsSilent() throws Exception {
    ClusterSpec cluster = fourWorkers();
    String w3 = cluster.taskAddress(new TaskId("worker", 3));
    List<ChildJvm> tasks = new ArrayList<>();
    try (ServerSocket silent = impostor(io.muster.cluster.HostPort.parse(w3).port(), new byte[0])) {
      for (int i = 0; i < 3; i++) {
        tasks.add(check("silent", cluster, i, "5s"));
      }
      ChildJvm leader = tasks.get(0);
      assertEquals(1, leader.waitFor(Duration.ofSeconds(60)), leader.output());
      assertTrue(lastLine(leader).contains("1 of 4 tasks missing: worker 3 at " + w3 + ": listening, but it did not "
          + "answer gRPC's HTTP/2 greeting within 500 ms (a task too busy to answer, or a program that is not a Muster "
          + "task)"), leader.output());
    } finally {
      tasks.forEach(ChildJvm::close);
    }
  }

  /**
   * The command line's own log configuration (not the tests'), as ./muster runs it: a leader whose
   * host name does not resolve is the task's start line and one failure line naming the host;
   * gRPC's resolver warnings, each with a stack trace in its text, come only with MUSTER_LOG_LEVEL=debug.
   */
  @Test
  void anUnresolvableLeaderIsOneLineWithoutGrpcsResolverTraces() throws Exception {
    String tfConfig = "{\"cluster\":{\"worker\":[\"nosuchhost.invalid:2222\",\"127.0.0.1:0\"]},"
        + "\"task\":{\"type\":\"worker\",\"index\":1}}";
    List<String> quiet = checkWithTheCommandLinesLogs(tfConfig, Map.of());
    assertEquals(2, quiet.size(), String.join("\n", quiet));
    assertTrue(quiet.get(0).matches("\\d\\d:\\d\\d:\\d\\d\\.\\d{3} INFO  task worker 1 serving on 127\\.0\\.0\\.1:\\d+"),
        quiet.get(0));
    assertEquals("muster check: worker 1 could not register with the coordination service within 3 s: coordination "
        + "leader worker 0 at nosuchhost.invalid:2222: unknown host 'nosuchhost.invalid'", quiet.get(1));

    List<String> debug = checkWithTheCommandLinesLogs(tfConfig, Map.of("MUSTER_LOG_LEVEL", "debug"));
    assertTrue(debug.stream().anyMatch(l -> l.contains("Failed to resolve name")), String.join("\n", debug));
  }

  private static List<String> checkWithTheCommandLinesLogs(String tfConfig, Map<String, String> env) throws Exception {
    Path err = Files.createTempFile(Files.createDirectories(LOGS), "unresolvable", ".err");
    ProcessBuilder builder = new ProcessBuilder(Path.of(System.getProperty("java.home"), "bin", "java").toString(),
        "-Xmx256m", "-Djava.util.logging.manager=org.apache.logging.log4j.jul.LogManager",
        "-Dlog4j2.configurationFile=" + Path.of(Muster.class.getResource("/log4j2.xml").toURI()),
        "-cp", System.getProperty("java.class.path"), Muster.class.getName(), "check", "--timeout", "3s")
        .redirectError(err.toFile()).redirectOutput(ProcessBuilder.Redirect.DISCARD);
    builder.environment().remove("MUSTER_LOG_LEVEL");
    builder.environment().put("TF_CONFIG", tfConfig);
    builder.environment().put("MUSTER_JOB_TOKEN", "check-test-token");
    builder.environment().putAll(env);
    Process process = builder.start();
    try {
      assertTrue(process.waitFor(60, java.util.concurrent.TimeUnit.SECONDS), "check still running after 60 s");
      assertEquals(1, process.exitValue(), Files.readString(err));
      return Files.readAllLines(err);
    } finally {
      process.destroyForcibly();
    }
  }
}
