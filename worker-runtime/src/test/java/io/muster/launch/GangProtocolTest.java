package io.muster.launch;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.grpc.stub.StreamObserver;
import io.muster.cluster.HostPort;
import io.muster.cluster.TaskId;
import io.muster.internal.rpc.ChannelCache;
import io.muster.internal.rpc.TaskServer;
import io.muster.proto.gang.GangServiceGrpc;
import io.muster.proto.gang.Join;
import io.muster.proto.gang.LauncherSays;
import io.muster.proto.gang.Line;
import io.muster.proto.gang.MemberSays;
import io.muster.proto.gang.TaskRef;
import io.muster.rpc.JobToken;
import io.muster.rpc.Security;
import io.muster.testing.FakeClock;
import java.time.Clock;
import java.time.Duration;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/** The launcher's endpoint and its members, over real gRPC on 127.0.0.1 under the job's token. */
class GangProtocolTest {

  private static final JobToken TOKEN = JobToken.of("the-jobs-token-0123456789");
  private static final TaskId WORKER_0 = new TaskId("worker", 0);
  private static final TaskId WORKER_1 = new TaskId("worker", 1);

  /** An endpoint on a task server, the lines its members send, and channels carrying {@code token}. */
  private static final class Launcher implements AutoCloseable, GangEndpoint.Launcher {
    final List<String> lines = new CopyOnWriteArrayList<>();
    final GangEndpoint endpoint = new GangEndpoint("executor", this);
    final TaskServer server = TaskServer.start(new TaskId("driver", 0), new HostPort("127.0.0.1", 0),
        Security.of(TOKEN));
    final ChannelCache channels;

    Launcher(JobToken token) {
      server.addService(endpoint);
      channels = new ChannelCache(Security.of(token));
    }

    @Override
    public void lines(TaskId task, List<Line> sent) {
      sent.forEach(line -> lines.add(task + " " + line.getStream() + " " + line.getText()));
    }

    GangMember join(TaskId task, int attempt, GangMember.Listener listener, Clock clock) {
      TaskRef ref = TaskRef.newBuilder().setJob(task.job()).setIndex(task.index()).setAttempt(attempt)
          .setContainerId(Integer.toString(task.index())).build();
      return GangMember.join(channels.get(server.address()), ref, HostPort.parse("127.0.0.1:" + (7000 + task.index())),
          "127.0.0.1", "the driver at " + server.address(), listener, clock);
    }

    @Override
    public void close() {
      channels.close();
      server.closeNow();
      endpoint.close();
    }
  }

  /** What a member heard from its launcher. */
  private static final class Heard implements GangMember.Listener {
    final CompletableFuture<String> aborted = new CompletableFuture<>();
    final CompletableFuture<String> preempted = new CompletableFuture<>();
    final CompletableFuture<Boolean> ended = new CompletableFuture<>();

    @Override
    public void abort(String reason) {
      aborted.complete(reason);
    }

    @Override
    public void preempt(String notice) {
      preempted.complete(notice);
    }

    @Override
    public void end() {
      ended.complete(true);
    }
  }

  private static Attempt twoWorkers(Clock clock) {
    return new Attempt(0, GangSpec.workers(2), Duration.ofMinutes(1), 42, clock);
  }

  @Test
  void theGangFormsItsLinesArriveInOrderAndItsExitsEndTheAttempt() throws Exception {
    try (Launcher launcher = new Launcher(TOKEN)) {
      Attempt attempt = twoWorkers(Clock.systemUTC());
      launcher.endpoint.start(attempt);
      try (GangMember w1 = launcher.join(WORKER_1, 0, new Heard(), Clock.systemUTC());
          GangMember w0 = launcher.join(WORKER_0, 0, new Heard(), Clock.systemUTC())) {
        List<HostPort> expected = List.of(HostPort.parse("127.0.0.1:7000"), HostPort.parse("127.0.0.1:7001"));
        assertEquals(expected, w1.awaitGang(Duration.ofSeconds(10)));
        assertEquals(expected, w0.awaitGang(Duration.ofSeconds(10)));
        assertTrue(w0.line(Line.Stream.STDOUT, "first\twith a tab"));
        assertTrue(w0.line(Line.Stream.STDERR, "second\nline"));
        assertTrue(w1.line(Line.Stream.PROGRESS, "epoch 1"));
        assertFalse(w0.exited(Attempt.Exit.ofCommand(0, List.of(), false)), "no container to offer");
        w1.exited(Attempt.Exit.ofCommand(0, List.of(), false));
      }
      assertEquals(Optional.of(new Attempt.Succeeded()), attempt.outcome());
      assertEquals(List.of("worker 0 STDOUT first\twith a tab", "worker 0 STDERR second\nline"),
          launcher.lines.stream().filter(l -> l.startsWith("worker 0")).toList());
      assertTrue(launcher.lines.contains("worker 1 PROGRESS epoch 1"), launcher.lines.toString());
    }
  }

  @Test
  void aMemberWithoutTheJobsTokenIsRefusedAndNothingJoins() throws Exception {
    try (Launcher launcher = new Launcher(JobToken.of("another-jobs-token-0123456"))) {
      Attempt attempt = twoWorkers(Clock.systemUTC());
      launcher.endpoint.start(attempt);
      try (GangMember stranger = launcher.join(WORKER_0, 0, new Heard(), Clock.systemUTC())) {
        GangMember.GangEndedException refused = assertThrows(GangMember.GangEndedException.class,
            () -> stranger.awaitGang(Duration.ofSeconds(10)));
        assertTrue(refused.getMessage().contains("UNAUTHENTICATED"), refused.getMessage());
      }
      assertEquals(List.of(WORKER_0, WORKER_1), attempt.missing());
    }
  }

  @Test
  void aMemberOfAnotherAttemptIsRefusedSayingWhichIsCurrent() throws Exception {
    try (Launcher launcher = new Launcher(TOKEN)) {
      launcher.endpoint.start(new Attempt(1, GangSpec.workers(2), Duration.ofMinutes(1), 42, Clock.systemUTC()));
      try (GangMember stale = launcher.join(WORKER_0, 0, new Heard(), Clock.systemUTC())) {
        assertEquals("worker 0: the driver at " + launcher.server.address() + " ended this attempt (worker 0 in 0 "
            + "belongs to attempt 1, which is not the launcher's current attempt (2))",
            assertThrows(GangMember.GangEndedException.class, () -> stale.awaitGang(Duration.ofSeconds(10)))
                .getMessage());
      }
    }
  }

  @Test
  void theClustersFailureOfOneMemberReachesTheOthersAtOnceAndALinkClosedWithoutExitIsOne() throws Exception {
    try (Launcher launcher = new Launcher(TOKEN)) {
      Attempt attempt = twoWorkers(Clock.systemUTC());
      launcher.endpoint.start(attempt);
      Heard survivor = new Heard();
      try (GangMember w0 = launcher.join(WORKER_0, 0, survivor, Clock.systemUTC())) {
        try (GangMember w1 = launcher.join(WORKER_1, 0, new Heard(), Clock.systemUTC())) {
          w1.awaitGang(Duration.ofSeconds(10));
        } // closed without an exit: its process died
        String reason = survivor.aborted.get(10, TimeUnit.SECONDS);
        assertEquals("worker 1 on 127.0.0.1 (executor 1) ended before it reported its exit (its process failed or was "
            + "killed)", reason);
        assertEquals(Optional.of(reason), w0.awaitAbort(Duration.ZERO));
        w0.exited(Attempt.Exit.ofCommand(143, List.of(), true));
      }
      assertEquals(Attempt.Kind.CLUSTER, ((Attempt.Failed) attempt.outcome().orElseThrow()).kind());
    }
  }

  /** A member whose command failed waits, after its exit, for the verdict: it comes once the cause window has passed. */
  @Test
  void aMemberThatExitedHearsTheVerdictAfterItsExit() throws Exception {
    FakeClock clock = new FakeClock();
    try (Launcher launcher = new Launcher(TOKEN)) {
      Attempt attempt = twoWorkers(clock);
      launcher.endpoint.start(attempt);
      try (GangMember w0 = launcher.join(WORKER_0, 0, new Heard(), Clock.systemUTC());
          GangMember w1 = launcher.join(WORKER_1, 0, new Heard(), Clock.systemUTC())) {
        w1.awaitGang(Duration.ofSeconds(10));
        assertFalse(w1.exited(Attempt.Exit.ofCommand(3, List.of("bad data"), false)));
        assertEquals(Optional.empty(), w1.awaitAbort(Duration.ofMillis(300)), "the cause window is not over");
        for (int s = 0; s < 3; s++) {
          clock.advance(Duration.ofSeconds(1));
          attempt.heard(WORKER_0);
          Thread.sleep(150); // a tick of the endpoint's
        }
        assertEquals(Optional.of("worker 1 on 127.0.0.1 (executor 1) exited with code 3; the last line of its "
            + "stderr:\n  bad data"), w1.awaitAbort(Duration.ofSeconds(10)));
      }
      assertEquals(Attempt.Kind.OWN, ((Attempt.Failed) attempt.outcome().orElseThrow()).kind());
    }
  }

  @Test
  void aNoticeFromOneMemberIsToldToEveryMember() throws Exception {
    try (Launcher launcher = new Launcher(TOKEN)) {
      launcher.endpoint.start(twoWorkers(Clock.systemUTC()));
      Heard other = new Heard();
      try (GangMember w0 = launcher.join(WORKER_0, 0, new Heard(), Clock.systemUTC());
          GangMember w1 = launcher.join(WORKER_1, 0, other, Clock.systemUTC())) {
        w1.awaitGang(Duration.ofSeconds(10));
        w0.notice("SIGPWR: Spark is decommissioning this executor");
        assertEquals("preemption notice for worker 0 (SIGPWR: Spark is decommissioning this executor)",
            other.preempted.get(10, TimeUnit.SECONDS));
      }
    }
  }

  @Test
  void aMemberSilentForTenSecondsOfTheLaunchersClockIsLostAndTheOthersAreToldWhy() throws Exception {
    FakeClock clock = new FakeClock();
    try (Launcher launcher = new Launcher(TOKEN)) {
      Attempt attempt = twoWorkers(clock);
      launcher.endpoint.start(attempt);
      Heard alive = new Heard();
      StreamObserver<MemberSays> silent = GangServiceGrpc.newStub(launcher.channels.get(launcher.server.address()))
          .attend(new IgnoreLauncher());
      try (GangMember w0 = launcher.join(WORKER_0, 0, alive, Clock.systemUTC())) {
        silent.onNext(MemberSays.newBuilder().setJoin(Join.newBuilder().setTask(TaskRef.newBuilder().setJob("worker")
            .setIndex(1).setContainerId("1")).setAddress("127.0.0.1:7001").setHost("127.0.0.1")).build());
        w0.awaitGang(Duration.ofSeconds(10));
        for (int s = 0; s < 10 && !alive.aborted.isDone(); s++) {
          clock.advance(Duration.ofSeconds(1));
          attempt.heard(WORKER_0); // as its beats say, on the test's clock
          Thread.sleep(150); // a tick of the endpoint's
        }
        assertEquals("worker 1 on 127.0.0.1 (executor 1) went silent: no word from it for 10 s",
            alive.aborted.get(10, TimeUnit.SECONDS));
      } finally {
        silent.onCompleted();
      }
    }
  }

  @Test
  void aLauncherSilentForFifteenSecondsOfTheMembersClockEndsTheMember() throws Exception {
    FakeClock clock = new FakeClock();
    JobToken token = TOKEN;
    try (TaskServer mute = TaskServer.start(new TaskId("driver", 0), new HostPort("127.0.0.1", 0), Security.of(token));
        ChannelCache channels = new ChannelCache(Security.of(token))) {
      mute.addService(new GangServiceGrpc.GangServiceImplBase() {
        @Override
        public StreamObserver<MemberSays> attend(StreamObserver<LauncherSays> response) {
          return new IgnoreMember(); // takes the stream, says nothing
        }
      });
      Heard heard = new Heard();
      TaskRef ref = TaskRef.newBuilder().setJob("worker").setIndex(0).setContainerId("0").build();
      try (GangMember member = GangMember.join(channels.get(mute.address()), ref, HostPort.parse("127.0.0.1:7000"),
          "127.0.0.1", "the driver at " + mute.address(), heard, clock)) {
        Thread.sleep(1500);
        assertFalse(heard.aborted.isDone(), "silent for no time on the member's clock");
        clock.advance(Heartbeats.LAUNCHER_SILENT);
        assertEquals("the driver at " + mute.address() + " went silent: no word for 15 s (this host or the launcher's "
            + "is down or cut off)", heard.aborted.get(10, TimeUnit.SECONDS));
        assertEquals(Optional.of(heard.aborted.get()), member.awaitAbort(Duration.ZERO));
      }
    }
  }

  /** A launcher that takes a member's stream and says nothing. */
  private static final class IgnoreMember implements StreamObserver<MemberSays> {
    @Override
    public void onNext(MemberSays says) {}

    @Override
    public void onError(Throwable t) {}

    @Override
    public void onCompleted() {}
  }

  /** A member that hears nothing its launcher says. */
  private static final class IgnoreLauncher implements StreamObserver<LauncherSays> {
    @Override
    public void onNext(LauncherSays says) {}

    @Override
    public void onError(Throwable t) {}

    @Override
    public void onCompleted() {}
  }
}
