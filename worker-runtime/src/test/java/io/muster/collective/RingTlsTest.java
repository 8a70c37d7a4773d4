package io.muster.collective;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.muster.cluster.HostPort;
import io.muster.coordination.CoordinationOptions;
import io.muster.rpc.Security;
import io.muster.rpc.TlsFiles;
import io.muster.testing.LocalCluster;
import io.muster.testing.LocalCollectives;
import io.muster.testing.SelfSignedCertificate;
import java.io.ByteArrayOutputStream;
import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.io.UncheckedIOException;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * The collective data plane with TLS configured: the same results, nothing of the tensors or the
 * job token readable on the wire (captured by a relay between two ranks, against a plaintext
 * control that does show them), and a peer without TLS refused.
 */
class RingTlsTest {

  private static final Duration TIMEOUT = Duration.ofSeconds(10);
  private static final CoordinationOptions OPTIONS = CoordinationOptions.DEFAULTS
      .withHeartbeatTimeout(Duration.ofSeconds(5)).withJoinTimeout(Duration.ofSeconds(30));
  private static final Security PLAIN = Security.of(LocalCluster.TOKEN);
  private static Security tls;
  private static ExecutorService pool;

  @BeforeAll
  static void certificate() throws Exception {
    SelfSignedCertificate cert = SelfSignedCertificate.create(Path.of("target", "ring-tls"));
    tls = new Security(LocalCluster.TOKEN,
        Optional.of(new TlsFiles(cert.certificate(), cert.privateKey(), cert.certificate())));
    pool = Executors.newCachedThreadPool();
  }

  @AfterAll
  static void stopPool() {
    pool.shutdownNow();
  }

  /** Rank r's element i: distinct on every rank, exact in float32, and so is every sum. */
  private static float value(int rank, int i) {
    return rank == 0 ? 7777.5f + 0.25f * i : -(rank * 3 + i % 5);
  }

  @ParameterizedTest(name = "{0} ranks")
  @ValueSource(ints = {2, 3, 4})
  void allReduceOverTlsGivesTheExactSumAndBitwiseIdenticalResults(int n) throws Exception {
    try (LocalCollectives group = new LocalCollectives(n, TIMEOUT, tls)) {
      // one frame; the gather (recursive doubling over the pair streams on 4 ranks); the ring in frames
      // (halving and doubling over the pair streams on 4 ranks)
      for (int count : new int[] {1, 1000, 300_001}) {
        List<float[]> results = group.onAll((c, r) -> {
          float[] f = new float[count];
          for (int i = 0; i < count; i++) {
            f[i] = value(r, i);
          }
          c.allReduce(f, ReduceOp.SUM);
          return f;
        });
        for (int i = 0; i < count; i++) {
          float expected = 0;
          for (int r = 0; r < n; r++) {
            expected += value(r, i);
          }
          for (int r = 0; r < n; r++) {
            assertEquals(expected, results.get(r)[i], 0f, "count " + count + " rank " + r + " element " + i);
            assertEquals(Float.floatToRawIntBits(results.get(0)[i]), Float.floatToRawIntBits(results.get(r)[i]));
          }
        }
      }
    }
  }

  @Test
  void overTlsMismatchedCallsFailEveryRankWithTheSameCause() throws Exception {
    try (LocalCollectives group = new LocalCollectives(3, TIMEOUT, tls)) {
      List<String> errors = group.onAll((c, r) -> {
        try {
          c.allReduce(new float[r == 0 ? 10 : 20], ReduceOp.SUM);
          return "no failure";
        } catch (CollectiveException e) {
          return e.getMessage();
        }
      });
      for (String error : errors) {
        assertTrue(error.startsWith("Collective ops is aborted by: collectives out of step"), error);
      }
    }
  }

  @Test
  void overTlsARankThatLeavesFailsTheOthersAtOnce() throws Exception {
    try (LocalCollectives group = new LocalCollectives(3, Duration.ofSeconds(30), tls)) {
      List<String> results = group.onAll((c, r) -> {
        if (r == 2) {
          c.close();
          return "left";
        }
        try {
          c.allReduce(new float[300_001], ReduceOp.SUM);
          return "no failure";
        } catch (CollectiveException e) {
          return e.getMessage();
        }
      });
      assertTrue(results.get(0).contains("receiving from worker 2 failed: the connection was closed; worker 2 has died or left"),
          results.get(0));
      // at once: the closed stream is the cause on both ranks, not the 30 s timeout
      assertTrue(results.get(1).contains("worker 2"), results.get(1));
      assertTrue(results.stream().noneMatch(m -> m.contains("timed out")), results.toString());
    }
  }

  /** Keepalives pass through the TLS pumps too: a rank busy for three times the timeout fails no one. */
  @Test
  void overTlsARankBusyForLongerThanTheTimeoutHoldsTheOthersUpWithoutFailingThem() throws Exception {
    Duration timeout = Duration.ofSeconds(1);
    try (LocalCollectives group = new LocalCollectives(3, timeout, tls)) {
      List<Float> sums = group.onAll((c, r) -> {
        float[] v = new float[1000];
        Arrays.fill(v, r + 1);
        if (r == 2) {
          try {
            Thread.sleep(timeout.multipliedBy(3).toMillis());
          } catch (InterruptedException e) {
            throw new IllegalStateException(e);
          }
        }
        c.allReduce(v, ReduceOp.SUM);
        return v[999];
      });
      assertEquals(List.of(6f, 6f, 6f), sums);
    }
  }

  @Test
  void tlsRingBytesOnTheWireHoldNeitherTheTensorNorTheToken() throws Exception {
    byte[] wire = captureRankZeroToOne(tls);
    assertTrue(wire.length > 1_000_000, "the relay saw " + wire.length + " bytes");
    assertFalse(contains(wire, rankZeroPattern()), "rank 0's tensor crossed the wire in clear text");
    assertFalse(contains(wire, LocalCluster.TOKEN.value().getBytes(StandardCharsets.US_ASCII)),
        "the job token crossed the wire in clear text");
  }

  /** The control for the test above: the same capture without TLS does show both. */
  @Test
  void plaintextRingBytesOnTheWireHoldTheTensorAndTheToken() throws Exception {
    byte[] wire = captureRankZeroToOne(PLAIN);
    assertTrue(contains(wire, rankZeroPattern()), "rank 0's tensor not found in the capture");
    assertTrue(contains(wire, LocalCluster.TOKEN.value().getBytes(StandardCharsets.US_ASCII)),
        "the job token not found in the capture");
  }

  /**
   * Rank 1 is made to accept before rank 0 exists: it is given a relay as rank 0's address, and the
   * relay reaches rank 0 only once the stranger has been refused and rank 0 has joined.
   */
  @Test
  void tlsRankRefusesAPlaintextPeerInWordsAndStillFormsTheRing() throws Exception {
    try (LocalCluster cluster = LocalCluster.workers(2, OPTIONS, tls)) {
      cluster.joinAll();
      Future<Collectives> rank1 = pool.submit(() -> create(cluster, 1, "refuse", tls));
      HostPort dataPlane = publishedAddress(cluster, "refuse", 1);
      CompletableFuture<HostPort> rank0Address = new CompletableFuture<>();
      try (Relay relay = new Relay(rank0Address)) {
        cluster.worker(0).agent().insert(RingSetup.key("refuse", 0),
            relay.address().toString().getBytes(StandardCharsets.UTF_8), true);
        refusePlaintextStranger(dataPlane);
        Future<Collectives> rank0 = pool.submit(() -> create(cluster, 0, "refuse", tls));
        rank0Address.complete(awaitAddressOtherThan(cluster, "refuse", 0, relay.address()));
        try (Collectives c0 = rank0.get(30, TimeUnit.SECONDS); Collectives c1 = rank1.get(30, TimeUnit.SECONDS)) {
          List<float[]> sums = allReduceOnBoth(c0, c1, 1000);
          assertEquals(value(0, 999) + value(1, 999), sums.get(1)[999], 0f);
        }
      }
    }
  }

  private static void refusePlaintextStranger(HostPort dataPlane) throws IOException {
    try (Socket stranger = new Socket(dataPlane.host(), dataPlane.port())) {
      stranger.setSoTimeout(10_000);
      DataOutputStream out = new DataOutputStream(stranger.getOutputStream());
      byte[] secret = LocalCluster.TOKEN.value().getBytes(StandardCharsets.US_ASCII);
      out.writeInt(RingSetup.MAGIC);
      out.writeInt(0);
      out.writeInt(secret.length);
      out.write(secret);
      out.flush();
      DataInputStream in = new DataInputStream(stranger.getInputStream());
      assertEquals(1, in.readByte(), "the plaintext peer was accepted");
      String refusal = in.readUTF();
      assertTrue(refusal.startsWith("this task's collectives use TLS and the peer's do not"), refusal);
      assertEquals(-1, in.read(), "the refused stream stays open");
    }
  }

  /** The address a rank publishes for itself, once it has replaced {@code placeholder}. */
  private static HostPort awaitAddressOtherThan(LocalCluster cluster, String group, int rank, HostPort placeholder)
      throws InterruptedException {
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
    while (System.nanoTime() < deadline) {
      HostPort published = publishedAddress(cluster, group, rank);
      if (!published.equals(placeholder)) {
        return published;
      }
      Thread.sleep(10);
    }
    throw new AssertionError(group + " rank " + rank + " did not publish its address within 30 s");
  }

  @Test
  void ranksWithDifferentTlsSettingsBothFailNamingTheSettings() throws Exception {
    try (LocalCluster cluster = LocalCluster.workers(2, OPTIONS, PLAIN)) {
      cluster.joinAll();
      Future<Collectives> withTls = pool.submit(() -> create(cluster, 0, "mixed", tls));
      Future<Collectives> without = pool.submit(() -> create(cluster, 1, "mixed", PLAIN));
      for (Future<Collectives> rank : List.of(withTls, without)) {
        ExecutionException e = assertThrows(ExecutionException.class, () -> rank.get(30, TimeUnit.SECONDS).close());
        String message = e.getCause().getMessage();
        assertTrue(message.contains("every task of a job needs the same TLS settings (MUSTER_TLS_CERT, MUSTER_TLS_KEY, "
            + "MUSTER_TLS_CA)"), message);
      }
    }
  }

  /**
   * Two ranks all-reduce a small (all-gather path) and a large (ring path) tensor while a relay
   * between rank 0 and rank 1's data-plane port records every byte both ways: rank 1 publishes its
   * port first, the test swaps the published address for the relay's, then rank 0 joins.
   */
  private static byte[] captureRankZeroToOne(Security security) throws Exception {
    try (LocalCluster cluster = LocalCluster.workers(2, OPTIONS, security)) {
      cluster.joinAll();
      Future<Collectives> rank1 = pool.submit(() -> create(cluster, 1, "capture", security));
      HostPort real = publishedAddress(cluster, "capture", 1);
      try (Relay relay = new Relay(CompletableFuture.completedFuture(real))) {
        cluster.worker(0).agent().insert(RingSetup.key("capture", 1),
            relay.address().toString().getBytes(StandardCharsets.UTF_8), true);
        try (Collectives c0 = create(cluster, 0, "capture", security);
            Collectives c1 = rank1.get(30, TimeUnit.SECONDS)) {
          for (int count : new int[] {1000, 300_001}) {
            List<float[]> sums = allReduceOnBoth(c0, c1, count);
            for (int i = 0; i < count; i++) {
              assertEquals(value(0, i) + value(1, i), sums.get(0)[i], 0f);
              assertEquals(value(0, i) + value(1, i), sums.get(1)[i], 0f);
            }
          }
        }
        return relay.captured();
      }
    }
  }

  private static Collectives create(LocalCluster cluster, int rank, String name, Security security) {
    var runtime = cluster.worker(rank);
    return Collectives.create(CollectiveGroup.of(cluster.cluster(), runtime.task()), name, "127.0.0.1",
        runtime.agent(), security, CommunicationOptions.DEFAULTS, TIMEOUT);
  }

  private static HostPort publishedAddress(LocalCluster cluster, String group, int rank) {
    return HostPort.parse(new String(cluster.worker(0).agent().get(RingSetup.key(group, rank), Duration.ofSeconds(30)),
        StandardCharsets.UTF_8));
  }

  private static List<float[]> allReduceOnBoth(Collectives c0, Collectives c1, int count) throws Exception {
    List<Future<float[]>> running = new ArrayList<>();
    for (Collectives c : List.of(c0, c1)) {
      running.add(pool.submit(() -> {
        float[] f = new float[count];
        for (int i = 0; i < count; i++) {
          f[i] = value(c.rank(), i);
        }
        c.allReduce(f, ReduceOp.SUM);
        return f;
      }));
    }
    return List.of(running.get(0).get(60, TimeUnit.SECONDS), running.get(1).get(60, TimeUnit.SECONDS));
  }

  /** The first 32 of rank 0's floats as they are sent: little-endian float32. */
  private static byte[] rankZeroPattern() {
    ByteBuffer pattern = ByteBuffer.allocate(32 * 4).order(ByteOrder.LITTLE_ENDIAN);
    for (int i = 0; i < 32; i++) {
      pattern.putFloat(value(0, i));
    }
    return pattern.array();
  }

  private static boolean contains(byte[] haystack, byte[] needle) {
    outer:
    for (int i = 0; i + needle.length <= haystack.length; i++) {
      for (int j = 0; j < needle.length; j++) {
        if (haystack[i + j] != needle[j]) {
          continue outer;
        }
      }
      return true;
    }
    return false;
  }

  /**
   * A TCP relay on 127.0.0.1 for one connection to {@code target} (connected to once it is known),
   * recording the bytes of both directions.
   */
  private static final class Relay implements AutoCloseable {
    private final ServerSocket server;
    private final ByteArrayOutputStream captured = new ByteArrayOutputStream();
    private final List<Socket> sockets = new ArrayList<>();
    private final Thread acceptor;

    Relay(CompletableFuture<HostPort> target) throws IOException {
      server = new ServerSocket(0, 1, InetAddress.getLoopbackAddress());
      acceptor = new Thread(() -> {
        try {
          Socket from = server.accept();
          HostPort address = target.join();
          Socket to = new Socket(address.host(), address.port());
          synchronized (sockets) {
            sockets.add(from);
            sockets.add(to);
          }
          Thread back = new Thread(() -> pump(to, from), "relay-back");
          back.setDaemon(true);
          back.start();
          pump(from, to);
        } catch (IOException e) {
          throw new UncheckedIOException(e);
        }
      }, "relay-forth");
      acceptor.setDaemon(true);
      acceptor.start();
    }

    HostPort address() {
      return new HostPort("127.0.0.1", server.getLocalPort());
    }

    private void pump(Socket from, Socket to) {
      byte[] buffer = new byte[64 << 10];
      try (InputStream in = from.getInputStream(); OutputStream out = to.getOutputStream()) {
        for (int n = in.read(buffer); n >= 0; n = in.read(buffer)) {
          synchronized (captured) {
            captured.write(buffer, 0, n);
          }
          out.write(buffer, 0, n);
        }
      } catch (IOException e) {
        // one side closed: the relay is done
      }
    }

    byte[] captured() {
      synchronized (captured) {
        return captured.toByteArray();
      }
    }

    @Override
    public void close() throws IOException {
      server.close();
      synchronized (sockets) {
        for (Socket s : sockets) {
          s.close();
        }
      }
    }
  }
}
