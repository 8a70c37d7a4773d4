package io.muster.yarn;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import io.muster.cluster.HostPort;
import io.muster.cluster.TaskId;
import io.muster.cluster.TaskType;
import io.muster.internal.rpc.ChannelCache;
import io.muster.internal.rpc.TaskServer;
import io.muster.launch.GangSpec;
import io.muster.proto.gang.AwaitGangRequest;
import io.muster.proto.gang.AwaitNextAttemptRequest;
import io.muster.proto.gang.AwaitNextAttemptResponse;
import io.muster.proto.gang.ExitedRequest;
import io.muster.proto.gang.GangServiceGrpc;
import io.muster.proto.gang.HeartbeatRequest;
import io.muster.proto.gang.HeartbeatResponse;
import io.muster.proto.gang.RegisterRequest;
import io.muster.proto.gang.TaskRef;
import io.muster.rpc.JobToken;
import io.muster.rpc.Security;
import io.muster.testing.Eventually;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/** The master's registration endpoint over real gRPC on 127.0.0.1. */
class GangEndpointTest {

  private static final JobToken TOKEN = JobToken.of("the-jobs-token-0123456789");

  private static TaskRef ref(String job, int index, int attempt, String container) {
    return TaskRef.newBuilder().setJob(job).setIndex(index).setAttempt(attempt).setContainerId(container).build();
  }

  /** The first attempt of a gang of two workers, in containers c0 and c1 on host h. */
  private static Attempt firstOfTwoWorkers() {
    Attempt attempt = new Attempt(0, GangSpec.workers(2), Duration.ofMinutes(1), 42);
    attempt.assign(TaskType.WORKER, "c0", "h", "http://h/0");
    attempt.assign(TaskType.WORKER, "c1", "h", "http://h/1");
    return attempt;
  }

  private static GangServiceGrpc.GangServiceBlockingStub stub(ChannelCache channels, TaskServer server) {
    return GangServiceGrpc.newBlockingStub(channels.get(server.address())).withDeadlineAfter(10, TimeUnit.SECONDS);
  }

  /** The endpoint served on 127.0.0.1 under the job's token, and channels that carry it. */
  private record Serving(TaskServer server, ChannelCache channels) implements AutoCloseable {
    static Serving of(GangEndpoint endpoint) {
      TaskServer server = TaskServer.start(new TaskId("master", 0), new HostPort("127.0.0.1", 0), Security.of(TOKEN));
      server.addService(endpoint);
      return new Serving(server, new ChannelCache(Security.of(TOKEN)));
    }

    GangServiceGrpc.GangServiceBlockingStub stub() {
      return GangEndpointTest.stub(channels, server);
    }

    @Override
    public void close() {
      channels.close();
      server.close();
    }
  }

  @Test
  void aCallWithoutTheJobsTokenIsRefusedAndNothingRegisters() {
    GangEndpoint endpoint = new GangEndpoint(true);
    Attempt attempt = new Attempt(0, GangSpec.workers(1), Duration.ofMinutes(1), 42);
    attempt.assign(TaskType.WORKER, "container_1", "127.0.0.1", "http://127.0.0.1/logs");
    endpoint.start(attempt);
    try (TaskServer server = TaskServer.start(new TaskId("master", 0), new HostPort("127.0.0.1", 0),
        Security.of(TOKEN));
        ChannelCache stranger = new ChannelCache(Security.of(JobToken.of("another-token")))) {
      server.addService(endpoint);
      StatusRuntimeException refused = assertThrows(StatusRuntimeException.class, () -> stub(stranger, server)
          .register(RegisterRequest.newBuilder().setTask(ref("worker", 0, 0, "container_1"))
              .setAddress("127.0.0.1:4000").build()));
      assertEquals(Status.Code.UNAUTHENTICATED, refused.getStatus().getCode());
      assertEquals(false, attempt.formed(), "the stranger's address was not taken");
    }
  }

  @Test
  void theGangFormsForItsOwnContainersAndRefusesAnotherAttemptsExecutor() {
    GangEndpoint endpoint = new GangEndpoint(true);
    Attempt attempt = new Attempt(1, GangSpec.of(1, 1, 1, 0), Duration.ofMinutes(1), 42);
    attempt.assign(TaskType.PS, "c-ps", "h", "http://h/ps");
    attempt.assign(TaskType.CHIEF, "c-chief", "h", "http://h/chief");
    attempt.assign(TaskType.WORKER, "c-worker", "h", "http://h/worker");
    endpoint.start(attempt);
    try (Serving master = Serving.of(endpoint)) {
      var stub = master.stub();
      StatusRuntimeException stale = assertThrows(StatusRuntimeException.class, () -> stub.register(
          RegisterRequest.newBuilder().setTask(ref("worker", 0, 0, "c-old")).setAddress("h:1").build()));
      assertEquals(Status.Code.FAILED_PRECONDITION, stale.getStatus().getCode());
      assertTrue(stale.getStatus().getDescription().contains("attempt 1, which is not the master's current attempt (2)"),
          stale.getStatus().getDescription());

      stub.register(RegisterRequest.newBuilder().setTask(ref("ps", 0, 1, "c-ps")).setAddress("h:30").build());
      stub.register(RegisterRequest.newBuilder().setTask(ref("worker", 0, 1, "c-worker")).setAddress("h:20").build());
      stub.register(RegisterRequest.newBuilder().setTask(ref("chief", 0, 1, "c-chief")).setAddress("h:10").build());
      assertEquals(List.of("h:10", "h:20", "h:30"), stub.awaitGang(AwaitGangRequest.newBuilder()
          .setTask(ref("ps", 0, 1, "c-ps")).build()).getAddressesList(), "member order: chief, worker, ps");

      assertEquals(HeartbeatResponse.Action.CONTINUE, stub.heartbeat(HeartbeatRequest.newBuilder()
          .setTask(ref("ps", 0, 1, "c-ps")).build()).getAction());
      stub.exited(ExitedRequest.newBuilder().setTask(ref("chief", 0, 1, "c-chief")).setExitCode(0).build());
      assertEquals(HeartbeatResponse.Action.END, stub.heartbeat(HeartbeatRequest.newBuilder()
          .setTask(ref("ps", 0, 1, "c-ps")).build()).getAction(), "the chief is done: the ps ends");
      assertEquals(HeartbeatResponse.Action.END, stub.heartbeat(HeartbeatRequest.newBuilder()
          .setTask(ref("worker", 0, 1, "c-worker")).build()).getAction(), "and so does the serving worker");
    }
  }

  /**
   * Worker 1's command fails; the master aborts the attempt and worker 0's command ends. Each
   * executor is told to offer its container, and waits; the next attempt keeps both containers
   * (what the master does with the offers of executors still waiting), and each executor hears
   * its task there and joins the new gang from the same container.
   */
  @Test
  void aFailedAttemptsExecutorsOfferTheirContainersAndHearTheirTaskInTheNextAttempt() throws Exception {
    GangEndpoint endpoint = new GangEndpoint(true);
    Attempt first = firstOfTwoWorkers();
    endpoint.start(first);
    try (Serving master = Serving.of(endpoint)) {
      var stub = master.stub();
      var futures = GangServiceGrpc.newFutureStub(master.channels().get(master.server().address()))
          .withDeadlineAfter(10, TimeUnit.SECONDS);
      stub.register(RegisterRequest.newBuilder().setTask(ref("worker", 0, 0, "c0")).setAddress("h:1").build());
      stub.register(RegisterRequest.newBuilder().setTask(ref("worker", 1, 0, "c1")).setAddress("h:2").build());

      assertTrue(stub.exited(ExitedRequest.newBuilder().setTask(ref("worker", 1, 0, "c1")).setExitCode(3).build())
          .getOfferContainer(), "the attempt failed with worker 1");
      Future<AwaitNextAttemptResponse> worker1 = futures.awaitNextAttempt(AwaitNextAttemptRequest.newBuilder()
          .setTask(ref("worker", 1, 0, "c1")).build());
      first.abortForFailure();
      assertEquals(HeartbeatResponse.Action.ABORT, stub.heartbeat(HeartbeatRequest.newBuilder()
          .setTask(ref("worker", 0, 0, "c0")).build()).getAction());
      assertTrue(stub.exited(ExitedRequest.newBuilder().setTask(ref("worker", 0, 0, "c0")).setExitCode(143)
          .setEndedByRequest(true).build()).getOfferContainer());
      Future<AwaitNextAttemptResponse> worker0 = futures.awaitNextAttempt(AwaitNextAttemptRequest.newBuilder()
          .setTask(ref("worker", 0, 0, "c0")).build());
      Eventually.within(Duration.ofSeconds(10), "both containers offered", first::allContainersDoneOrOffered);
      assertFalse(worker0.isDone() || worker1.isDone(), "the executors wait for the next attempt");

      Attempt next = new Attempt(1, GangSpec.workers(2), Duration.ofMinutes(1), 42);
      List<Attempt.Member> offered = first.offered();
      offered.forEach(m -> next.keep(m.task, m.containerId, m.host, m.logs));
      endpoint.start(next);
      offered.forEach(m -> m.offer.accept(m.task, next.number));

      assertEquals(ref("worker", 0, 1, "c0"), worker0.get(10, TimeUnit.SECONDS).getNext());
      assertEquals(ref("worker", 1, 1, "c1"), worker1.get(10, TimeUnit.SECONDS).getNext());
      stub.register(RegisterRequest.newBuilder().setTask(ref("worker", 0, 1, "c0")).setAddress("h:3").build());
      stub.register(RegisterRequest.newBuilder().setTask(ref("worker", 1, 1, "c1")).setAddress("h:4").build());
      assertEquals(List.of("h:3", "h:4"), stub.awaitGang(AwaitGangRequest.newBuilder()
          .setTask(ref("worker", 0, 1, "c0")).build()).getAddressesList(), "the kept containers form the next gang");
      assertEquals(List.of(), next.containersToEnd().stream().filter(c -> !List.of("c0", "c1").contains(c)).toList());
    }
  }

  /** An executor whose attempt did not fail, or whose job keeps no containers, is told to exit at once. */
  @Test
  void anOfferIsDeclinedAtOnceWhereNoNextAttemptCanWantIt() {
    for (boolean keepContainers : List.of(true, false)) {
      GangEndpoint endpoint = new GangEndpoint(keepContainers);
      Attempt attempt = firstOfTwoWorkers();
      endpoint.start(attempt);
      try (Serving master = Serving.of(endpoint)) {
        var stub = master.stub();
        if (!keepContainers) {
          attempt.abort("worker 1 failed");
        }
        assertEquals(!keepContainers, attempt.failed());
        assertFalse(stub.exited(ExitedRequest.newBuilder().setTask(ref("worker", 0, 0, "c0")).setExitCode(0).build())
            .getOfferContainer(), "keep " + keepContainers);
        AwaitNextAttemptResponse answer = stub.awaitNextAttempt(AwaitNextAttemptRequest.newBuilder()
            .setTask(ref("worker", 0, 0, "c0")).build());
        assertFalse(answer.hasNext());
        assertEquals(keepContainers ? "attempt 1 has not failed"
            : "the job keeps no container across attempts (muster.yarn.restart.keep-containers is false)",
            answer.getReason());
        assertEquals(List.of(), attempt.offered());
      }
    }
  }
}
