package io.muster.internal.rpc;

import io.muster.rpc.JobToken;
import io.muster.rpc.Security;
import io.muster.rpc.TlsFiles;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.grpc.ManagedChannel;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import io.grpc.netty.shaded.io.grpc.netty.NettyChannelBuilder;
import io.muster.cluster.ClusterSpec;
import io.muster.cluster.HostPort;
import io.muster.cluster.TaskId;
import io.muster.coordination.CoordinationOptions;
import io.muster.internal.coordination.CoordinationService;
import io.muster.proto.coordination.CoordinatedTask;
import io.muster.proto.coordination.CoordinatedTaskState;
import io.muster.proto.coordination.CoordinationServiceGrpc;
import io.muster.proto.coordination.GetTaskStateRequest;
import io.muster.proto.coordination.RegisterTaskRequest;
import io.muster.testing.SelfSignedCertificate;
import java.io.UncheckedIOException;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

class TaskServerTest {

  private static final TaskId WORKER_0 = new TaskId("worker", 0);
  private static final Security SECURITY = Security.of(JobToken.of("right-token-0123456789"));
  private static final RegisterTaskRequest REGISTER = RegisterTaskRequest.newBuilder()
      .setSourceTask(CoordinatedTask.newBuilder().setJobName("worker").setTaskId(0)).setIncarnation(7).build();

  @Test
  void portZeroBindsAFreePortAndReportsIt() {
    try (TaskServer server = TaskServer.start(WORKER_0, new HostPort("127.0.0.1", 0), SECURITY)) {
      assertNotEquals(0, server.port());
      assertEquals("127.0.0.1:" + server.port(), server.address().toString());
      assertEquals(new Reachability.Listening(), Reachability.probe(server.address(),
          java.time.Duration.ofSeconds(1)));
    }
  }

  @Test
  void aTakenPortIsAClearError() {
    try (TaskServer first = TaskServer.start(WORKER_0, new HostPort("127.0.0.1", 0), SECURITY)) {
      UncheckedIOException e = assertThrows(UncheckedIOException.class,
          () -> TaskServer.start(new TaskId("worker", 1), first.address(), SECURITY));
      assertEquals("task worker 1 cannot listen on " + first.address() + ": port " + first.port()
          + " is already in use; stop the process holding it or give worker 1 another port in TF_CONFIG", e.getMessage());
    }
  }

  @Test
  void callsWithoutTheRightTokenAreRefusedAndChangeNothing() {
    try (TaskServer server = TaskServer.start(WORKER_0, new HostPort("127.0.0.1", 0), SECURITY);
        CoordinationService service = serviceFor(server)) {
      server.addService(service);
      ManagedChannel bare = NettyChannelBuilder.forAddress("127.0.0.1", server.port()).usePlaintext().build();
      try (ChannelCache wrong = new ChannelCache(Security.of(JobToken.of("wrong-token")));
          ChannelCache right = new ChannelCache(SECURITY)) {
        StatusRuntimeException none = assertThrows(StatusRuntimeException.class,
            () -> stub(bare).registerTask(REGISTER));
        assertEquals(Status.Code.UNAUTHENTICATED, none.getStatus().getCode());
        assertEquals("call carries no job token (task /job:worker/replica:0/task:0)", none.getStatus().getDescription());

        StatusRuntimeException mismatch = assertThrows(StatusRuntimeException.class,
            () -> CoordinationServiceGrpc.newBlockingStub(wrong.get(server.address()))
                .withDeadlineAfter(5, TimeUnit.SECONDS).registerTask(REGISTER));
        assertEquals(Status.Code.UNAUTHENTICATED, mismatch.getStatus().getCode());
        assertEquals("job token does not match (task /job:worker/replica:0/task:0)", mismatch.getStatus().getDescription());

        // Nothing was registered by the refused calls.
        var states = CoordinationServiceGrpc.newBlockingStub(right.get(server.address()))
            .withDeadlineAfter(5, TimeUnit.SECONDS).getTaskState(GetTaskStateRequest.getDefaultInstance());
        assertEquals(CoordinatedTaskState.TASKSTATE_DISCONNECTED, states.getTaskState(0).getState());
      } finally {
        bare.shutdownNow();
      }
    }
  }

  @Test
  void tlsServesPeersThatTrustTheCertificateAndRefusesPlaintext() throws Exception {
    SelfSignedCertificate cert = SelfSignedCertificate.create(Path.of("target", "tls"));
    Security tls = new Security(SECURITY.token(),
        Optional.of(new TlsFiles(cert.certificate(), cert.privateKey(), cert.certificate())));
    try (TaskServer server = TaskServer.start(WORKER_0, new HostPort("127.0.0.1", 0), tls);
        CoordinationService service = serviceFor(server);
        ChannelCache trusting = new ChannelCache(tls)) {
      server.addService(service);
      CoordinationServiceGrpc.newBlockingStub(trusting.get(server.address()))
          .withDeadlineAfter(10, TimeUnit.SECONDS).registerTask(REGISTER);
      var states = CoordinationServiceGrpc.newBlockingStub(trusting.get(server.address()))
          .withDeadlineAfter(5, TimeUnit.SECONDS).getTaskState(GetTaskStateRequest.getDefaultInstance());
      assertEquals(CoordinatedTaskState.TASKSTATE_CONNECTED, states.getTaskState(0).getState());

      try (ChannelCache plaintext = new ChannelCache(SECURITY)) {
        StatusRuntimeException refused = assertThrows(StatusRuntimeException.class,
            () -> CoordinationServiceGrpc.newBlockingStub(plaintext.get(server.address()))
                .withDeadlineAfter(5, TimeUnit.SECONDS).getTaskState(GetTaskStateRequest.getDefaultInstance()));
        assertEquals(Status.Code.UNAVAILABLE, refused.getStatus().getCode());
      }
    }
  }

  @Test
  void tokenFromTheEnvironmentIsRequired() {
    IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> JobToken.fromEnvironment(Map.of()));
    assertTrue(e.getMessage().startsWith("MUSTER_JOB_TOKEN is not set: every task of a job must carry the same secret token"),
        e.getMessage());
    assertTrue(JobToken.fromEnvironment(Map.of("MUSTER_JOB_TOKEN", "abc")).matches("abc"));
    assertTrue(!JobToken.of("abc").matches("abd") && !JobToken.of("abc").matches(null));
  }

  private static CoordinationService serviceFor(TaskServer server) {
    ClusterSpec cluster = ClusterSpec.of(Map.of("worker", List.of(server.address().toString())));
    return CoordinationService.forAllTasks(cluster, CoordinationOptions.DEFAULTS);
  }

  private static CoordinationServiceGrpc.CoordinationServiceBlockingStub stub(ManagedChannel channel) {
    return CoordinationServiceGrpc.newBlockingStub(channel).withDeadlineAfter(5, TimeUnit.SECONDS);
  }
}
