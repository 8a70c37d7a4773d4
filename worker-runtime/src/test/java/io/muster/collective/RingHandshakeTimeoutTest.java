package io.muster.collective;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.muster.cluster.ClusterSpec;
import io.muster.cluster.HostPort;
import io.muster.cluster.TaskId;
import io.muster.testing.LocalCluster;
import java.io.InputStream;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.net.SocketException;
import java.nio.channels.ServerSocketChannel;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/** The collectives' data-plane port: a connection that never sends its handshake is closed, and the real peer still gets in. */
class RingHandshakeTimeoutTest {

  @Test
  void anIdleConnectionIsClosedAfterTheHandshakeTimeoutAndThePredecessorIsThenAccepted() throws Exception {
    ClusterSpec cluster = ClusterSpec.of(Map.of("worker", List.of("127.0.0.1:1", "127.0.0.1:2")));
    CollectiveGroup rank1 = CollectiveGroup.of(cluster, new TaskId("worker", 1));
    try (ServerSocketChannel server = ServerSocketChannel.open()) {
      server.bind(new InetSocketAddress("127.0.0.1", 0));
      int port = ((InetSocketAddress) server.getLocalAddress()).getPort();
      CompletableFuture<RingStream> accepted = CompletableFuture.supplyAsync(() -> {
        try {
          return RingSetup.accept(server, rank1, new TaskId("worker", 0), LocalCluster.TOKEN, Optional.empty(),
              Duration.ofSeconds(60));
        } catch (java.io.IOException e) {
          throw new java.io.UncheckedIOException(e);
        }
      });
      try (Socket idle = new Socket("127.0.0.1", port)) {
        idle.setSoTimeout((int) RingSetup.HANDSHAKE_TIMEOUT.plusSeconds(20).toMillis()); // a hang guard
        long start = System.nanoTime();
        InputStream in = idle.getInputStream();
        int read;
        try {
          read = in.read();
        } catch (SocketException e) {
          read = -1; // a reset is a close too
        }
        Duration took = Duration.ofNanos(System.nanoTime() - start);
        System.out.println("an idle data-plane connection was closed after " + took.toMillis() + " ms");
        assertEquals(-1, read);
        assertTrue(took.compareTo(RingSetup.HANDSHAKE_TIMEOUT.minusSeconds(1)) >= 0, "not before the timeout: " + took);
        assertTrue(took.compareTo(RingSetup.HANDSHAKE_TIMEOUT.plusSeconds(5)) <= 0, "soon after the timeout: " + took);
      }
      RingStream fromPrev = RingSetup.dial(new HostPort("127.0.0.1", port), 0, new TaskId("worker", 1),
          LocalCluster.TOKEN, Optional.empty(), Duration.ofSeconds(10));
      try {
        accepted.get(10, TimeUnit.SECONDS).close();
      } finally {
        fromPrev.close();
      }
    }
  }
}
