package io.muster.collective;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.muster.cluster.HostPort;
import io.muster.internal.rpc.TlsContexts;
import io.muster.rpc.TlsFiles;
import io.muster.testing.ChildJvm;
import io.muster.testing.SelfSignedCertificate;
import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.nio.channels.ServerSocketChannel;
import java.nio.channels.SocketChannel;
import java.nio.file.Path;
import java.security.Security;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import javax.net.ssl.SSLContext;
import org.junit.jupiter.api.Test;

/**
 * Closing a written TLS stream as a ring does at its end delivers every byte: what its pump still
 * holds (a collective returns once its last bytes are handed to the pump, and the ring may be
 * closed right after), and, after TLS key updates, what is still in flight when it closes.
 */
class RingStreamTlsCloseTest {

  private static final int TOTAL = 16 << 20;

  @Test
  void closingAWrittenTlsStreamRightAfterTheLastWriteLosesNoByte() throws Exception {
    assertEquals(TOTAL, deliveredAfterClose(Path.of("target", "ring-tls-close")),
        "every byte handed to the written stream arrived");
  }

  /**
   * The same after TLS 1.3 key updates: a JDK that has sent a stream's worth of bytes under one key
   * (2^37 by default, 2^16 in this child JVM) asks its peer to update its key too, and the peer's
   * answer arrives on the written stream, which never reads; left unread, it would turn the close
   * into a reset that loses what is still in flight.
   */
  @Test
  void closingAWrittenTlsStreamAfterKeyUpdatesLosesNoByte() throws Exception {
    Path dir = Path.of("target", "ring-tls-key-updates");
    try (ChildJvm child = ChildJvm.start("key-updates", KeyUpdates.class, List.of(dir.toString()), Map.of(), dir)) {
      assertEquals(0, child.waitFor(Duration.ofSeconds(60)), child.output());
      assertTrue(child.output().contains("delivered " + TOTAL + " of " + TOTAL), child.output());
    }
  }

  /** Runs the close in a JVM whose TLS updates its keys every 64 KiB. */
  public static final class KeyUpdates {
    public static void main(String[] args) throws Exception {
      Security.setProperty("jdk.tls.keyLimits",
          "AES/GCM/NoPadding KeyUpdate 2^16, ChaCha20-Poly1305 KeyUpdate 2^16");
      System.out.println("delivered " + deliveredAfterClose(Path.of(args[0])) + " of " + TOTAL);
    }
  }

  /**
   * Writes {@link #TOTAL} bytes to a TLS stream read by a slow reader, closes the written stream
   * right after the last write, and returns how many bytes the reader got.
   */
  static long deliveredAfterClose(Path dir) throws Exception {
    SelfSignedCertificate cert = SelfSignedCertificate.create(dir);
    SSLContext context = TlsContexts.of(new TlsFiles(cert.certificate(), cert.privateKey(), cert.certificate()));
    try (ServerSocketChannel server = ServerSocketChannel.open()) {
      server.bind(new InetSocketAddress("127.0.0.1", 0));
      int port = ((InetSocketAddress) server.getLocalAddress()).getPort();
      CompletableFuture<RingStream> accepted = CompletableFuture.supplyAsync(() -> {
        try {
          return RingStream.tlsServer(server.accept(), context, new byte[0]);
        } catch (Exception e) {
          throw new IllegalStateException(e);
        }
      });
      RingStream written = RingStream.tlsClient(SocketChannel.open(new InetSocketAddress("127.0.0.1", port)), context,
          new HostPort("127.0.0.1", port));
      RingStream read = accepted.get(10, TimeUnit.SECONDS);
      // as the ring's token handshake does: the accepting side answers, and the dialling side reads
      // the answer (and with it TLS 1.3's session tickets, which left unread would turn the close
      // into a reset)
      read.out().write(0);
      read.out().flush();
      assertEquals(0, written.in().read());
      written.start(true, "test-tls-send", () -> { });
      read.start(false, "test-tls-receive", () -> { });
      // a slow reader (64 KiB a millisecond), so that the written stream's pump is full when the
      // writer hands it its last bytes and closes
      CompletableFuture<Long> reader = CompletableFuture.supplyAsync(() -> {
        ByteBuffer into = ByteBuffer.allocate(64 << 10);
        long total = 0;
        try {
          while (true) {
            into.clear();
            long n = read.read(new ByteBuffer[] {into}, true);
            if (n < 0) {
              return total;
            }
            for (int i = 0; i < n; i++) {
              if (into.get(i) != (byte) (total + i)) {
                throw new IllegalStateException("byte " + (total + i) + " is wrong");
              }
            }
            total += n;
            Thread.sleep(1);
          }
        } catch (Exception e) {
          return total; // a reset: what arrived before it
        } finally {
          try {
            read.close();
          } catch (Exception ignored) {
            // the test's verdict is the count
          }
        }
      });
      ByteBuffer data = ByteBuffer.allocate(TOTAL);
      for (int i = 0; i < TOTAL; i++) {
        data.put(i, (byte) i);
      }
      ByteBuffer[] buffers = {data};
      long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
      while (data.hasRemaining()) {
        if (System.nanoTime() > deadline) {
          throw new IllegalStateException("the reader took " + data.position() + " of " + TOTAL + " bytes in 30 s");
        }
        if (written.write(buffers) == 0) {
          Thread.sleep(0, 200_000);
        }
      }
      written.closeAfterPeer();

      return reader.get(30, TimeUnit.SECONDS);
    }
  }
}
