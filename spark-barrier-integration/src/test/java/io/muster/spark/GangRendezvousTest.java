package io.muster.spark;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.muster.cluster.HostPort;
import io.muster.launch.GangSpec;
import io.muster.rpc.JobToken;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.stream.IntStream;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/** The driver's rendezvous on 127.0.0.1, its members on threads of their own. */
class GangRendezvousTest {
  private static final JobToken TOKEN = JobToken.of("0123456789abcdef0123456789abcdef");
  private static final GangSpec THREE = GangSpec.of(0, 3, 0, 0);
  private final ExecutorService members = Executors.newCachedThreadPool();

  @AfterEach
  void stop() {
    members.shutdownNow();
  }

  private Future<List<HostPort>> join(GangRendezvous rendezvous, int member, String token) {
    return members.submit(() -> new GangRendezvous.Member(rendezvous.address(), token, THREE.task(member))
        .exchange(member, new HostPort("10.0.0." + member, 4000 + member), Duration.ofSeconds(30)));
  }

  @Test
  void everyMemberGetsEveryAddressInMemberOrderWhenTheLastJoins() throws Exception {
    try (GangRendezvous rendezvous = GangRendezvous.start("127.0.0.1", "127.0.0.1", TOKEN, THREE,
        Duration.ofSeconds(30), missing -> "never asked", why -> {})) {
      List<Future<List<HostPort>>> joined = IntStream.of(2, 0, 1).mapToObj(m -> join(rendezvous, m, TOKEN.value()))
          .toList();
      List<HostPort> expected = List.of(HostPort.parse("10.0.0.0:4000"), HostPort.parse("10.0.0.1:4001"),
          HostPort.parse("10.0.0.2:4002"));
      for (Future<List<HostPort>> member : joined) {
        assertEquals(expected, member.get(30, TimeUnit.SECONDS));
      }
      assertEquals(java.util.Optional.empty(), rendezvous.failure());
    }
  }

  @Test
  void atTheTimeoutTheWaitingMembersAndTheDriverAreToldWhoIsMissing() throws Exception {
    CompletableFuture<String> timedOut = new CompletableFuture<>();
    try (GangRendezvous rendezvous = GangRendezvous.start("127.0.0.1", "127.0.0.1", TOKEN, THREE,
        Duration.ofSeconds(1), missing -> "missing " + missing, timedOut::complete)) {
      Future<List<HostPort>> first = join(rendezvous, 0, TOKEN.value());
      Future<List<HostPort>> stranger = join(rendezvous, 2, "ffffffffffffffffffffffffffffffff");
      Future<List<HostPort>> second = join(rendezvous, 1, TOKEN.value());
      String why = "the gang did not form within 1 s (the gang timeout): missing [2]";
      assertEquals(why, timedOut.get(30, TimeUnit.SECONDS), "a member with another job's token does not count");
      assertEquals("worker 0: " + why, failure(first));
      assertEquals("worker 1: " + why, failure(second));
      assertTrue(failure(stranger).startsWith("worker 2: the driver at 127.0.0.1:"), "refused without an answer");
      assertEquals(java.util.Optional.of(why), rendezvous.failure());
      assertEquals("worker 2: " + why, failure(join(rendezvous, 2, TOKEN.value())), "too late to join");
    }
  }

  @Test
  void aMemberStillWaitingWhenTheRunEndsIsToldSo() throws Exception {
    Future<List<HostPort>> waiting;
    try (GangRendezvous rendezvous = GangRendezvous.start("127.0.0.1", "127.0.0.1", TOKEN, THREE,
        Duration.ofSeconds(30), missing -> "never asked", why -> {})) {
      waiting = join(rendezvous, 1, TOKEN.value());
      Thread.sleep(300); // let it join; a later one is refused the same way
    }
    assertEquals("worker 1: the run ended before the gang formed (another task failed?)", failure(waiting));
  }

  private static String failure(Future<?> member) throws Exception {
    try {
      member.get(30, TimeUnit.SECONDS);
      throw new AssertionError("the member joined");
    } catch (ExecutionException e) {
      return e.getCause().getMessage();
    }
  }
}
