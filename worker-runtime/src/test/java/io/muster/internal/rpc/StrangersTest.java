package io.muster.internal.rpc;

import io.muster.rpc.JobToken;
import io.muster.rpc.Security;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.muster.cluster.ClusterSpec;
import io.muster.cluster.HostPort;
import io.muster.cluster.TaskId;
import io.muster.cluster.TfConfig;
import io.muster.testing.ChildJvm;
import io.muster.testing.LocalCluster;
import io.muster.testing.ServeThenJoin;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.ServerSocket;
import java.net.Socket;
import java.net.SocketException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/** Connections to a task's port that are not gRPC: quiet in the log, bounded in time. */
class StrangersTest {

  @Test
  void twentyGarbageConnectionsMakeAtMostTwentyWarnLinesAndTheTaskStillCompletesItsJob() throws Exception {
    int port;
    try (ServerSocket free = new ServerSocket(0)) {
      port = free.getLocalPort();
    }
    ClusterSpec cluster = ClusterSpec.of(Map.of("worker", List.of("127.0.0.1:" + port)));
    try (ChildJvm task = ChildJvm.start("garbage-target", ServeThenJoin.class, List.of(),
        Map.of("TF_CONFIG", TfConfig.of(cluster, new TaskId("worker", 0)).toJson(), JobToken.ENV,
            LocalCluster.TOKEN.value()), Path.of("target", "child-logs"))) {
      task.awaitOutput("SERVING", Duration.ofSeconds(60));
      List<CompletableFuture<Void>> strangers = new ArrayList<>();
      for (int i = 0; i < 20; i++) {
        strangers.add(CompletableFuture.runAsync(() -> {
          try (Socket socket = new Socket("127.0.0.1", port)) {
            socket.setSoTimeout(30_000);
            socket.getOutputStream().write("GET / HTTP/1.1\r\nHost: muster\r\n\r\n".getBytes(StandardCharsets.US_ASCII));
            socket.getInputStream().readAllBytes(); // until the server closes it
          } catch (SocketException e) {
            // a reset is a close too
          } catch (IOException e) {
            throw new java.io.UncheckedIOException(e);
          }
        }));
      }
      CompletableFuture.allOf(strangers.toArray(CompletableFuture[]::new)).get(60, TimeUnit.SECONDS);
      OutputStream stdin = task.process().getOutputStream();
      stdin.write("go\n".getBytes(StandardCharsets.US_ASCII));
      stdin.flush();
      assertEquals(0, task.waitFor(Duration.ofSeconds(60)), task.output());
      String output = task.output();
      assertTrue(output.contains("DONE"), output);
      List<String> warnings = output.lines().filter(l -> l.contains(" WARN ")).toList();
      System.out.println(warnings.size() + " WARN lines for 20 garbage connections: " + warnings);
      assertTrue(!warnings.isEmpty() && warnings.size() <= 20, output);
      assertTrue(warnings.get(0).contains("that does not speak gRPC (it began with \"GET / HTTP/1.1"), warnings.get(0));
      assertFalse(output.contains("Transport failed") || output.contains("Hex dump") || output.contains("\tat "),
          "no stack traces or hex dumps from gRPC:\n" + output);
    }
  }

  @Test
  void anIdleConnectionIsClosedAfterTheHandshakeTimeout() throws Exception {
    try (TaskServer server = TaskServer.start(new TaskId("worker", 0), new HostPort("127.0.0.1", 0),
        Security.of(LocalCluster.TOKEN));
        Socket idle = new Socket("127.0.0.1", server.port())) {
      idle.setSoTimeout((int) TaskServer.HANDSHAKE_TIMEOUT.plusSeconds(20).toMillis()); // a hang guard
      long start = System.nanoTime();
      InputStream in = idle.getInputStream();
      try {
        while (in.read() >= 0) {
          // gRPC's server may send its settings first; read on until it closes
        }
      } catch (SocketException e) {
        // a reset is a close too
      }
      Duration took = Duration.ofNanos(System.nanoTime() - start);
      System.out.println("an idle connection was closed after " + took.toMillis() + " ms");
      assertTrue(took.compareTo(TaskServer.HANDSHAKE_TIMEOUT.minusSeconds(1)) >= 0, "not before the timeout: " + took);
      assertTrue(took.compareTo(TaskServer.HANDSHAKE_TIMEOUT.plusSeconds(5)) <= 0, "soon after the timeout: " + took);
    }
  }
}
