package io.muster.bench;

import io.grpc.Channel;
import io.muster.cluster.ClusterSpec;
import io.muster.cluster.HostPort;
import io.muster.internal.Json;
import io.muster.cluster.TaskId;
import io.muster.cluster.TfConfig;
import io.muster.coordinator.ClusterCoordinator;
import io.muster.coordinator.RemoteValue;
import io.muster.proto.coordinator.ClosureWorkerGrpc;
import io.muster.proto.coordinator.PingRequest;
import io.muster.ps.Optimizer;
import io.muster.internal.rpc.ChannelCache;
import io.muster.rpc.JobToken;
import io.muster.rpc.Security;
import io.muster.strategy.ParameterServerStrategy;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;

/**
 * How fast the {@link ClusterCoordinator} dispatches closures: W workers and one ps as separate
 * JVMs on 127.0.0.1, the coordinator (chief) in this one. Per measurement, one JSON line:
 * closures per second for a closure that reads one scalar variable on the ps
 * ({@code muster-coordinator-noop}), for one that assign-adds a 1 MiB float32 variable on the ps
 * ({@code muster-coordinator-assign_add-1MiB}), and, as the baseline of the same run, plain gRPC
 * unary calls per second from W threads of this JVM to the workers ({@code grpc-unary}).
 */
final class CoordinatorBench {

  private static final Security SECURITY = Security.of(JobToken.of("bench-coordinator-token"));

  private CoordinatorBench() {}

  static Bench.Job parse(List<String> args) {
    if (args.isEmpty() || args.size() > 2) {
      throw new IllegalArgumentException("needs W (workers) and optionally ROUNDS, was " + args);
    }
    int workers = Bench.positive(args.get(0), "W (workers) must be a positive integer, was '" + args.get(0)
        + "'");
    int rounds = args.size() > 1 ? Bench.positive(args.get(1), "ROUNDS must be a positive integer, was '"
        + args.get(1) + "'") : 5;
    return () -> run(workers, rounds);
  }

  private static void run(int workers, int rounds) throws Exception {
    Map<String, List<String>> jobs = new LinkedHashMap<>();
    List<String> free = Children.freeAddresses(2 + workers);
    jobs.put("chief", free.subList(0, 1));
    jobs.put("worker", free.subList(1, 1 + workers));
    jobs.put("ps", free.subList(1 + workers, 2 + workers));
    ClusterSpec cluster = ClusterSpec.of(jobs);
    List<Process> children = new ArrayList<>();
    try {
      for (TaskId task : cluster.allTasks()) {
        if (!task.job().equals("chief")) {
          children.add(Children.start(CoordinatorBenchTask.class, List.of(), Map.of(TfConfig.ENV,
              TfConfig.of(cluster, task).toJson(), JobToken.ENV, SECURITY.token().value())));
        }
      }
      try (ParameterServerStrategy chief = ParameterServerStrategy.builder().cluster(cluster, new TaskId("chief", 0))
          .security(SECURITY).coordination(CoordinatorBenchTask.COORDINATION)
          .functions(CoordinatorBenchTask.functions()).join()) {
        ClusterCoordinator coordinator = chief.coordinator();
        coordinator.variables().create("scalar", new long[0], Optimizer.NONE);
        coordinator.variables().create("big", new long[] {CoordinatorBenchTask.MIB_FLOATS}, Optimizer.NONE);
        for (int round = 0; round < rounds; round++) {
          report("grpc-unary", workers, 20_000, grpcUnary(cluster, workers, 20_000));
          report("muster-coordinator-noop", workers, 10_000, closures(coordinator, "read_scalar", 10_000));
          report("muster-coordinator-assign_add-1MiB", workers, 2_000, closures(coordinator, "assign_add_1mib", 2_000));
        }
      }
    } finally {
      for (Process child : children) {
        if (!child.waitFor(30, TimeUnit.SECONDS)) {
          child.destroyForcibly();
        }
      }
    }
  }

  /** Closures per second: schedule them all, then join (after a warm-up of a tenth as many). */
  private static double closures(ClusterCoordinator coordinator, String function, int n) {
    for (int i = 0; i < n / 10; i++) {
      coordinator.schedule(function);
    }
    coordinator.join();
    long start = System.nanoTime();
    RemoteValue last = null;
    for (int i = 0; i < n; i++) {
      last = coordinator.schedule(function);
    }
    coordinator.join();
    last.fetch();
    return n / ((System.nanoTime() - start) / 1e9);
  }

  /** Unary calls per second, W threads each calling its own worker in turn, as the coordinator's threads do. */
  private static double grpcUnary(ClusterSpec cluster, int workers, int n) throws InterruptedException {
    try (ChannelCache channels = new ChannelCache(SECURITY)) {
      List<Thread> threads = new ArrayList<>();
      AtomicLong calls = new AtomicLong();
      int each = n / workers;
      for (int w = 0; w < workers; w++) {
        Channel channel = channels.get(HostPort.parse(cluster.taskAddress(new TaskId("worker", w))));
        ClosureWorkerGrpc.ClosureWorkerBlockingStub stub = ClosureWorkerGrpc.newBlockingStub(channel);
        for (int i = 0; i < 200; i++) {
          stub.withDeadlineAfter(10, TimeUnit.SECONDS).ping(PingRequest.getDefaultInstance());
        }
        threads.add(new Thread(() -> {
          for (int i = 0; i < each; i++) {
            stub.withDeadlineAfter(10, TimeUnit.SECONDS).ping(PingRequest.getDefaultInstance());
            calls.incrementAndGet();
          }
        }, "bench-unary-" + w));
      }
      long start = System.nanoTime();
      threads.forEach(Thread::start);
      for (Thread t : threads) {
        t.join();
      }
      return calls.get() / ((System.nanoTime() - start) / 1e9);
    }
  }

  private static void report(String method, int workers, int closures, double perSecond) {
    Map<String, Object> line = new LinkedHashMap<>();
    line.put("method", method);
    line.put("workers", workers);
    line.put("closures", closures);
    line.put("per_s", Math.round(perSecond));
    System.out.println(Json.write(line));
  }
}
