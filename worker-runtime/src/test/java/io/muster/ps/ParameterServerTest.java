package io.muster.ps;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.muster.cluster.HostPort;
import io.muster.cluster.TaskId;
import io.muster.proto.ps.CreateVariableRequest;
import io.muster.proto.ps.ParameterServerGrpc;
import io.muster.internal.rpc.ChannelCache;
import io.muster.rpc.JobToken;
import io.muster.rpc.Security;
import io.muster.internal.rpc.TaskServer;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.stream.LongStream;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/** Variables on real parameter-server gRPC services on 127.0.0.1 (two ps tasks in this JVM). */
class ParameterServerTest {

  private static final Security SECURITY = Security.of(JobToken.of("ps-test-token-0123456789"));
  private static final Duration TIMEOUT = Duration.ofSeconds(30);

  private final List<TaskServer> servers = new ArrayList<>();
  private ChannelCache channels;

  @BeforeEach
  void startTwoParameterServers() {
    for (int i = 0; i < 2; i++) {
      TaskId ps = new TaskId("ps", i);
      TaskServer server = TaskServer.start(ps, new HostPort("127.0.0.1", 0), SECURITY);
      server.addService(new ParameterServerService(ps.toString()));
      servers.add(server);
    }
    channels = new ChannelCache(SECURITY);
  }

  @AfterEach
  void stop() {
    channels.close();
    servers.forEach(TaskServer::close);
  }

  private ParameterServerGrpc.ParameterServerStub stub(TaskId ps) {
    return ParameterServerGrpc.newStub(channels.get(servers.get(ps.index()).address()));
  }

  /** A variable laid out as ParameterServers lays it out (round-robin from ps 0), created on its ps tasks. */
  private Variable create(String name, long[] shape, Optimizer optimizer, int shards) {
    List<long[]> ranges = shape.length == 0 ? List.<long[]>of(new long[] {0, 1}) : Partitioner.rowRanges(shape[0], shards);
    List<Variable.Shard> placement = new ArrayList<>();
    for (int i = 0; i < ranges.size(); i++) {
      TaskId ps = new TaskId("ps", i % servers.size());
      String shardName = ranges.size() == 1 ? name : name + "/part_" + i;
      long[] shardShape = shape.length == 0 ? shape : Partitioner.shardShape(shape, ranges.get(i)[1]);
      ParameterServerGrpc.newBlockingStub(channels.get(servers.get(ps.index()).address())).create(
          CreateVariableRequest.newBuilder().setName(shardName).addAllShape(LongStream.of(shardShape).boxed().toList())
              .setOptimizer(optimizer.toProto()).build());
      placement.add(new Variable.Shard(shardName, ps, ranges.get(i)[0], ranges.get(i)[1]));
    }
    return new Variable(name, shape, placement, this::stub, TIMEOUT);
  }

  @Test
  void aNewVariableIsZerosAndReadsBackWhatWasAssigned() {
    Variable w = create("w", new long[] {2, 3}, Optimizer.NONE, 1);
    assertArrayEquals(new float[6], w.read());
    w.assign(new float[] {1, 2, 3, 4, 5, 6});
    w.assignAdd(new float[] {10, 10, 10, 10, 10, 10});
    assertArrayEquals(new float[] {11, 12, 13, 14, 15, 16}, w.read());
  }

  @Test
  void aVariableLargerThanOneMessageTravelsInChunks() {
    int n = 3_000_000; // 12 MB: three times gRPC's default 4 MiB message limit
    Variable big = create("big", new long[] {n}, Optimizer.NONE, 1);
    float[] values = new float[n];
    for (int i = 0; i < n; i++) {
      values[i] = i * 0.5f;
    }
    big.assign(values);
    assertArrayEquals(values, big.read());
  }

  @Test
  void concurrentAssignAddsFromFourWorkersAllLand() throws Exception {
    Variable counter = create("counter", new long[] {1000}, Optimizer.NONE, 1);
    float[] ones = new float[1000];
    java.util.Arrays.fill(ones, 1f);
    ExecutorService workers = Executors.newFixedThreadPool(4);
    try {
      List<Future<?>> done = new ArrayList<>();
      for (int w = 0; w < 4; w++) {
        done.add(workers.submit(() -> {
          for (int i = 0; i < 250; i++) {
            counter.assignAdd(ones);
          }
        }));
      }
      for (Future<?> f : done) {
        f.get();
      }
    } finally {
      workers.shutdownNow();
    }
    float[] expected = new float[1000];
    java.util.Arrays.fill(expected, 1000f);
    assertArrayEquals(expected, counter.read(), "4 workers × 250 assign-adds of 1 must give exactly 1000 everywhere");
  }

  @Test
  void concurrentGradientStepsFromFourWorkersAllLand() throws Exception {
    Variable w = create("w", new long[] {10}, Optimizer.sgd(1f), 1);
    float[] gradient = new float[10];
    java.util.Arrays.fill(gradient, -1f);
    ExecutorService workers = Executors.newFixedThreadPool(4);
    try {
      List<Future<?>> done = new ArrayList<>();
      for (int t = 0; t < 4; t++) {
        done.add(workers.submit(() -> {
          for (int i = 0; i < 100; i++) {
            w.applyGradient(gradient);
          }
        }));
      }
      for (Future<?> f : done) {
        f.get();
      }
    } finally {
      workers.shutdownNow();
    }
    for (float v : w.read()) {
      assertEquals(400f, v);
    }
  }

  @Test
  void aShardedVariableSplitsItsRowsTheWayTensorFlowDoesAndGathersAndScattersAcrossShards() {
    // 13 rows of 2 over 5 shards: rows [0,1,2] [3,4,5] [6,7,8] [9,10] [11,12], on ps 0,1,0,1,0.
    Variable e = create("embedding", new long[] {13, 2}, Optimizer.NONE, 5);
    assertEquals(List.of(3L, 3L, 3L, 2L, 2L), e.shards().stream().map(Variable.Shard::rows).toList());
    assertEquals(List.of(0L, 3L, 6L, 9L, 11L), e.shards().stream().map(Variable.Shard::firstRow).toList());
    assertEquals(List.of(0, 1, 0, 1, 0), e.shards().stream().map(s -> s.ps().index()).toList());
    float[] values = new float[26];
    for (int i = 0; i < 26; i++) {
      values[i] = i;
    }
    e.assign(values);
    assertArrayEquals(values, e.read());
    assertArrayEquals(new float[] {24, 25, 0, 1, 18, 19}, e.gather(12, 0, 9));
    e.scatterAdd(new long[] {2, 12, 2}, new float[] {100, 100, 1, 1, 5, 5});
    assertArrayEquals(new float[] {109, 110, 25, 26}, e.gather(2, 12));
    assertEquals(2f, e.read()[2], "rows not scattered into keep their values");
  }

  @Test
  void badRequestsAreRefusedWithWhatIsWrong() {
    Variable w = create("w", new long[] {4}, Optimizer.NONE, 1);
    IllegalArgumentException size = assertThrows(IllegalArgumentException.class, () -> w.assign(new float[3]));
    assertTrue(size.getMessage().contains("needs 4 values, got 3"), size.getMessage());
    IllegalStateException noOptimizer = assertThrows(IllegalStateException.class, () -> w.applyGradient(new float[4]));
    assertTrue(noOptimizer.getMessage().contains("without an optimizer"), noOptimizer.getMessage());
    IllegalArgumentException row = assertThrows(IllegalArgumentException.class, () -> w.gather(4));
    assertTrue(row.getMessage().contains("row 4 is out of range"), row.getMessage());
    Variable missing = new Variable("missing", new long[] {1}, List.of(new Variable.Shard("missing", new TaskId("ps", 1),
        0, 1)), this::stub, TIMEOUT);
    IllegalArgumentException notFound = assertThrows(IllegalArgumentException.class, missing::read);
    assertTrue(notFound.getMessage().contains("ps 1 hosts no variable missing"), notFound.getMessage());
  }

  @Test
  void aVariableCannotBeCreatedAgainWithAnotherShape() {
    create("w", new long[] {4}, Optimizer.NONE, 1);
    io.grpc.StatusRuntimeException e = assertThrows(io.grpc.StatusRuntimeException.class,
        () -> create("w", new long[] {5}, Optimizer.NONE, 1));
    assertEquals(io.grpc.Status.Code.ALREADY_EXISTS, e.getStatus().getCode());
    assertTrue(e.getStatus().getDescription().contains("already hosts variable w with shape [4]"),
        e.getStatus().getDescription());
  }

  @Test
  void aCallWithTheWrongJobTokenIsRefusedAndChangesNothing() {
    Variable w = create("w", new long[] {2}, Optimizer.NONE, 1);
    try (ChannelCache stranger = new ChannelCache(Security.of(JobToken.of("another-jobs-token-0123")))) {
      Variable forged = new Variable("w", new long[] {2}, w.shards(),
          ps -> ParameterServerGrpc.newStub(stranger.get(servers.get(ps.index()).address())), TIMEOUT);
      IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> forged.assign(new float[] {7, 7}));
      assertTrue(e.getMessage().startsWith("UNAUTHENTICATED"), e.getMessage());
    }
    assertArrayEquals(new float[2], w.read());
  }

  @Test
  void aDeadParameterServerIsNamedAsUnavailable() {
    Variable w = create("w", new long[] {2}, Optimizer.NONE, 2);
    servers.get(1).close();
    ParameterServerUnavailableException e = assertThrows(ParameterServerUnavailableException.class, w::read);
    assertEquals(new TaskId("ps", 1), e.ps());
    assertTrue(e.getMessage().startsWith("parameter server ps 1 did not answer the read of w/part_1"), e.getMessage());
  }
}
