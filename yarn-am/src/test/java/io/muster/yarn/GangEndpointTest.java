package io.muster.yarn;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import io.muster.cluster.HostPort;
import io.muster.cluster.TaskId;
import io.muster.cluster.TaskType;
import io.muster.launch.GangSpec;
import io.muster.proto.gang.AwaitGangRequest;
import io.muster.proto.gang.ExitedRequest;
import io.muster.proto.gang.GangServiceGrpc;
import io.muster.proto.gang.HeartbeatRequest;
import io.muster.proto.gang.HeartbeatResponse;
import io.muster.proto.gang.RegisterRequest;
import io.muster.proto.gang.TaskRef;
import io.muster.internal.rpc.ChannelCache;
import io.muster.rpc.JobToken;
import io.muster.rpc.Security;
import io.muster.internal.rpc.TaskServer;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/** The master's registration endpoint over real gRPC on 127.0.0.1. */
class GangEndpointTest {

  private static final JobToken TOKEN = JobToken.of("the-jobs-token-0123456789");

  private static TaskRef ref(String job, int index, int attempt, String container) {
    return TaskRef.newBuilder().setJob(job).setIndex(index).setAttempt(attempt).setContainerId(container).build();
  }

  private static GangServiceGrpc.GangServiceBlockingStub stub(ChannelCache channels, TaskServer server) {
    return GangServiceGrpc.newBlockingStub(channels.get(server.address())).withDeadlineAfter(10, TimeUnit.SECONDS);
  }

  @Test
  void aCallWithoutTheJobsTokenIsRefusedAndNothingRegisters() {
    GangEndpoint endpoint = new GangEndpoint();
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
    GangEndpoint endpoint = new GangEndpoint();
    Attempt attempt = new Attempt(1, GangSpec.of(1, 1, 1, 0), Duration.ofMinutes(1), 42);
    attempt.assign(TaskType.PS, "c-ps", "h", "http://h/ps");
    attempt.assign(TaskType.CHIEF, "c-chief", "h", "http://h/chief");
    attempt.assign(TaskType.WORKER, "c-worker", "h", "http://h/worker");
    endpoint.start(attempt);
    try (TaskServer server = TaskServer.start(new TaskId("master", 0), new HostPort("127.0.0.1", 0),
        Security.of(TOKEN));
        ChannelCache channels = new ChannelCache(Security.of(TOKEN))) {
      server.addService(endpoint);
      var stub = stub(channels, server);
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
}
