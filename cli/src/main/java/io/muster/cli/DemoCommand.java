package io.muster.cli;

import io.muster.cluster.ClusterSpec;
import io.muster.cluster.HostPort;
import io.muster.cluster.TaskId;
import io.muster.cluster.TfConfig;
import io.muster.coordination.CoordinationOptions;
import io.muster.coordination.TaskRuntime;
import io.muster.rpc.JobToken;
import io.muster.rpc.Security;
import io.muster.rpc.TaskServer;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.security.SecureRandom;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CompletableFuture;

/**
 * {@code muster demo [--tasks 4]}: a job of N tasks on 127.0.0.1 in this JVM, launched the way
 * the Spark and YARN launchers do it: every task binds its port first, the cluster is assembled
 * from the bound addresses, a fresh job token is made, then every task joins, publishes a value in
 * the key-value store, reads everyone else's, meets the others at a barrier and leaves through the
 * shutdown barrier. Prints what each step took.
 */
final class DemoCommand {
  private DemoCommand() {}

  static int run(List<String> args, PrintStream out) {
    Options options = Options.parse(args, Set.of("--tasks"), Set.of());
    int n;
    try {
      n = Integer.parseInt(options.get("--tasks", "4"));
    } catch (NumberFormatException e) {
      throw new UsageException("--tasks must be an integer, was '" + options.get("--tasks", "") + "'");
    }
    if (n < 1 || n > 256) {
      throw new UsageException("--tasks must be in 1..256, was " + n);
    }
    byte[] secret = new byte[16];
    new SecureRandom().nextBytes(secret);
    Security security = Security.of(JobToken.of(HexFormat.of().formatHex(secret)));
    CoordinationOptions coordination = CoordinationOptions.DEFAULTS
        .withJoinTimeout(Duration.ofMinutes(1)).withShutdownBarrierTimeout(Duration.ofSeconds(30));

    long start = System.nanoTime();
    List<TaskServer> servers = new ArrayList<>();
    List<TaskRuntime> runtimes = new ArrayList<>();
    try {
      List<String> addresses = new ArrayList<>();
      for (int i = 0; i < n; i++) {
        TaskServer server = TaskServer.start(new TaskId("worker", i), new HostPort("127.0.0.1", 0), security);
        servers.add(server);
        addresses.add(server.address().toString());
      }
      ClusterSpec cluster = ClusterSpec.of(Map.of("worker", addresses));
      out.println("cluster: " + cluster);
      for (TaskServer server : servers) {
        runtimes.add(TaskRuntime.builder(TfConfig.of(cluster, server.task()), security)
            .server(server).options(coordination).start());
      }
      long bound = System.nanoTime();
      everyTask(runtimes, TaskRuntime::join);
      long joined = System.nanoTime();
      everyTask(runtimes, r -> r.agent().insert("demo/address/" + r.task().index(),
          r.server().address().toString().getBytes(StandardCharsets.UTF_8), false));
      everyTask(runtimes, r -> {
        for (int i = 0; i < n; i++) {
          r.agent().get("demo/address/" + i, Duration.ofSeconds(30));
        }
      });
      everyTask(runtimes, r -> r.agent().barrier("demo", Duration.ofSeconds(30), List.of()));
      long met = System.nanoTime();
      out.printf("%d tasks bound in %d ms, all joined in %d ms, exchanged %d keys and passed a barrier in %d ms%n",
          n, ms(bound - start), ms(joined - bound), n * n, ms(met - joined));
      out.println("states: " + runtimes.get(0).agent().taskStates().stream()
          .map(s -> s.task() + "=" + s.state()).toList());
      everyTask(runtimes, r -> r.agent().shutdown());
      out.printf("all tasks left together in %d ms%n", ms(System.nanoTime() - met));
      return 0;
    } finally {
      runtimes.forEach(TaskRuntime::close);
      servers.forEach(TaskServer::close);
    }
  }

  private interface Step {
    void run(TaskRuntime runtime) throws Exception;
  }

  private static void everyTask(List<TaskRuntime> runtimes, Step step) {
    CompletableFuture.allOf(runtimes.stream().map(r -> CompletableFuture.runAsync(() -> {
      try {
        step.run(r);
      } catch (Exception e) {
        throw new IllegalStateException(r.task() + ": " + e.getMessage(), e);
      }
    }, command -> new Thread(command, "muster-demo-" + r.task().index()).start())).toArray(CompletableFuture[]::new)).join();
  }

  private static long ms(long nanos) {
    return Duration.ofNanos(nanos).toMillis();
  }
}
