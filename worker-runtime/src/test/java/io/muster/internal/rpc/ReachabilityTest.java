package io.muster.internal.rpc;

import io.muster.rpc.JobToken;
import io.muster.rpc.Security;
import static org.junit.jupiter.api.Assertions.assertEquals;

import io.muster.cluster.HostPort;
import io.muster.cluster.TaskId;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import org.junit.jupiter.api.Test;

/** What answers at an address: a task's gRPC server, or a program that is not a Muster task, in words. */
class ReachabilityTest {

  private static final Duration TIMEOUT = Duration.ofMillis(500);

  /** A plain TCP server on 127.0.0.1 that writes {@code answer} (nothing: stays silent) to every connection. */
  private static ServerSocket answering(byte[] answer) throws Exception {
    ServerSocket server = new ServerSocket(0, 50, InetAddress.getByName("127.0.0.1"));
    Thread accept = new Thread(() -> {
      while (!server.isClosed()) {
        try (Socket s = server.accept()) {
          s.getOutputStream().write(answer);
          s.getOutputStream().flush();
          Thread.sleep(1_000);
        } catch (Exception e) {
          return;
        }
      }
    }, "reachability-test-server");
    accept.setDaemon(true);
    accept.start();
    return server;
  }

  private static HostPort at(ServerSocket server) {
    return new HostPort("127.0.0.1", server.getLocalPort());
  }

  @Test
  void aTasksServerAnswersHttp2() {
    try (TaskServer server = TaskServer.start(new TaskId("worker", 0), new HostPort("127.0.0.1", 0),
        Security.of(JobToken.of("reachability-token")))) {
      // a generous timeout: a server just started on a loaded machine may take a while to answer first
      assertEquals(new Reachability.Listening(), Reachability.identify(server.address(), Duration.ofSeconds(10)));
    }
  }

  @Test
  void anHttp1ServerIsQuotedByItsFirstLine() throws Exception {
    try (ServerSocket http = answering("HTTP/1.1 400 Bad Request\r\nConnection: close\r\n\r\n"
        .getBytes(StandardCharsets.US_ASCII))) {
      Reachability.Answer answer = Reachability.identify(at(http), TIMEOUT);
      assertEquals(new Reachability.Stranger("it answered 'HTTP/1.1 400 Bad Request' to gRPC's HTTP/2 greeting"),
          answer);
      assertEquals("held by a program that is not a Muster task: it answered 'HTTP/1.1 400 Bad Request' to gRPC's "
          + "HTTP/2 greeting", answer.toString());
    }
  }

  @Test
  void garbageIsShownAsItsFirstBytes() throws Exception {
    try (ServerSocket garbage = answering(new byte[] {(byte) 0xde, (byte) 0xad, (byte) 0xbe, (byte) 0xef, 1, 2, 3, 4, 5,
        6})) {
      assertEquals(new Reachability.Stranger("it answered 10 bytes that are not HTTP/2 (de ad be ef 01 02 03 04 05 06) "
          + "to gRPC's HTTP/2 greeting"), Reachability.identify(at(garbage), TIMEOUT));
    }
  }

  @Test
  void aSilentServerIsReportedWithoutAVerdict() throws Exception {
    try (ServerSocket silent = answering(new byte[0])) {
      assertEquals(new Reachability.NoAnswer("listening, but it did not answer gRPC's HTTP/2 greeting within 500 ms (a "
          + "task too busy to answer, or a program that is not a Muster task)", false), Reachability.identify(at(silent),
          TIMEOUT));
    }
  }

  @Test
  void nothingListeningIsConnectionRefused() throws Exception {
    int port;
    try (ServerSocket free = new ServerSocket(0)) {
      port = free.getLocalPort();
    }
    assertEquals(new Reachability.NoAnswer("connection refused", false), Reachability.identify(
        new HostPort("127.0.0.1", port), TIMEOUT));
  }
}
