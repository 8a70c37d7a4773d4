package io.muster.collective;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.google.protobuf.ByteString;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import io.muster.cluster.HostPort;
import io.muster.cluster.TaskId;
import io.muster.coordination.CoordinationException;
import io.muster.coordination.CoordinationOptions;
import io.muster.coordination.TaskState;
import io.muster.coordination.TaskStatus;
import io.muster.proto.coordination.CoordinatedTask;
import io.muster.proto.coordination.CoordinationServiceGrpc;
import io.muster.proto.coordination.HeartbeatRequest;
import io.muster.proto.coordination.InsertKeyValueRequest;
import io.muster.proto.coordination.KeyValueEntry;
import io.muster.proto.coordination.ReportErrorToServiceRequest;
import io.muster.internal.rpc.ChannelCache;
import io.muster.rpc.JobToken;
import io.muster.rpc.Security;
import io.muster.testing.LocalCluster;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/**
 * A stranger who knows the job's addresses but not its token, at every entry point of a running
 * job's control and data planes: Heartbeat, ReportErrorToService and InsertKeyValue on the leader's
 * task server, and the collective ring's handshake. Each is refused; no error reaches any task and
 * nothing the stranger sent is stored. (The driver's log port is CommandLogsTest's.)
 */
class WrongTokenTest {

  private static final Security STRANGER = Security.of(JobToken.of("not-the-job-token-0123"));
  private static final CoordinationOptions OPTIONS = CoordinationOptions.DEFAULTS
      .withHeartbeatTimeout(Duration.ofSeconds(5)).withJoinTimeout(Duration.ofSeconds(30));

  private static CoordinatedTask worker(int index) {
    return CoordinatedTask.newBuilder().setJobName("worker").setTaskId(index).build();
  }

  private static void assertRefused(StatusRuntimeException e) {
    assertEquals(Status.Code.UNAUTHENTICATED, e.getStatus().getCode(), e.toString());
    assertEquals("job token does not match (task /job:worker/replica:0/task:0)", e.getStatus().getDescription());
  }

  @Test
  void aWrongTokenIsRefusedEverywhereAndChangesNothing() throws Exception {
    ExecutorService pool = Executors.newFixedThreadPool(3);
    List<Collectives> ranks = new ArrayList<>();
    try (LocalCluster cluster = LocalCluster.workers(3, OPTIONS); ChannelCache strangers = new ChannelCache(STRANGER)) {
      cluster.joinAll();
      HostPort leader = HostPort.parse(cluster.cluster().taskAddress(new TaskId("worker", 0)));
      var stub = CoordinationServiceGrpc.newBlockingStub(strangers.get(leader)).withDeadlineAfter(30, TimeUnit.SECONDS);

      assertRefused(assertThrows(StatusRuntimeException.class, () -> stub.heartbeat(
          HeartbeatRequest.newBuilder().setSourceTask(worker(1)).setIncarnation(42).build())));
      assertRefused(assertThrows(StatusRuntimeException.class, () -> stub.reportErrorToService(
          ReportErrorToServiceRequest.newBuilder().setErrorOrigin(worker(1)).setErrorCode(Status.Code.INTERNAL.value())
              .setErrorMessage("injected by a stranger").build())));
      assertRefused(assertThrows(StatusRuntimeException.class, () -> stub.insertKeyValue(
          InsertKeyValueRequest.newBuilder().setKv(KeyValueEntry.newBuilder().setKey("muster/collective/ring/0")
              .setValue(ByteString.copyFromUtf8("10.6.6.6:1"))).setAllowOverwrite(true).build())));

      // The service decides a report before it answers it: had the stranger's been taken, worker 1
      // would be in error there now. Nothing was stored either.
      List<TaskStatus> states = cluster.worker(2).agent().taskStates();
      assertTrue(states.stream().allMatch(s -> s.state() == TaskState.CONNECTED), states.toString());
      assertEquals(Map.of(), cluster.worker(2).agent().getDir("muster"), "the stranger's key under muster/ was not stored");

      // The ring: ranks 0 and 1 set up; rank 0 then waits for rank 2's stream, and the stranger
      // dials rank 0's published data-plane port first, as rank 2 would, with the wrong token.
      List<Future<Collectives>> setUp = new ArrayList<>();
      for (int r : new int[] {0, 1}) {
        setUp.add(pool.submit(() -> create(cluster, r)));
      }
      HostPort dataPlane = HostPort.parse(new String(cluster.worker(2).agent().get(RingSetup.key("ring", 0),
          Duration.ofSeconds(30)), StandardCharsets.UTF_8));
      IOException refused = assertThrows(IOException.class, () -> RingSetup.dial(dataPlane, 2, new TaskId("worker", 0),
          STRANGER.token(), Optional.empty(), Duration.ofSeconds(30)));
      assertEquals("collective stream to worker 0 at " + dataPlane + " refused: job token does not match "
          + "(task /job:worker/replica:0/task:0)", refused.getMessage());
      setUp.add(pool.submit(() -> create(cluster, 2)));
      for (Future<Collectives> f : setUp) {
        ranks.add(f.get(60, TimeUnit.SECONDS));
      }
      List<Future<float[]>> sums = new ArrayList<>();
      for (Collectives c : ranks) {
        sums.add(pool.submit(() -> {
          float[] v = {c.rank() + 1f};
          c.allReduce(v, ReduceOp.SUM);
          return v;
        }));
      }
      for (Future<float[]> sum : sums) {
        assertEquals(6f, sum.get(60, TimeUnit.SECONDS)[0], "the ring formed with the real rank 2");
      }

      for (int i = 0; i < 3; i++) {
        List<CoordinationException> errors = cluster.errors(new TaskId("worker", i));
        assertEquals(List.of(), errors, "worker " + i + " was told of an error");
      }
      Map<String, byte[]> stored = cluster.worker(2).agent().getDir("muster");
      assertEquals(List.of("muster/collective/ring/0", "muster/collective/ring/1", "muster/collective/ring/2"),
          List.copyOf(stored.keySet()), "only the ranks' own addresses are stored");
      assertEquals(dataPlane.toString(), new String(stored.get("muster/collective/ring/0"), StandardCharsets.UTF_8));
    } finally {
      ranks.forEach(Collectives::close);
      pool.shutdownNow();
    }
  }

  private static Collectives create(LocalCluster cluster, int rank) {
    var runtime = cluster.worker(rank);
    return Collectives.create(CollectiveGroup.of(cluster.cluster(), runtime.task()), "ring", "127.0.0.1",
        runtime.agent(), Security.of(LocalCluster.TOKEN), CommunicationOptions.DEFAULTS, Duration.ofSeconds(30));
  }
}
