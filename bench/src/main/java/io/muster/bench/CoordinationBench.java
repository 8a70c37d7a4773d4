package io.muster.bench;

import io.muster.internal.CommandOptions;
import io.muster.cluster.ClusterSpec;
import io.muster.cluster.HostPort;
import io.muster.internal.Json;
import io.muster.cluster.TaskId;
import io.muster.cluster.TfConfig;
import io.muster.internal.coordination.CoordinationAgent;
import io.muster.coordination.CoordinationOptions;
import io.muster.internal.coordination.TaskRuntime;
import io.muster.rpc.JobToken;
import io.muster.rpc.Security;
import io.muster.internal.rpc.TaskServer;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.LongAdder;
import java.util.function.Consumer;

/**
 * How long a job takes to assemble, and how fast the coordination leader serves key-value calls.
 *
 * <ul>
 *   <li>join, processes: N child JVMs, each given TF_CONFIG, from the first spawn to the last
 *       {@code JOINED} line ({@code wall_ms}, JVM start-up included), and the slowest task's own
 *       time from its server being up to all-registered ({@code max_join_ms});
 *   <li>join, threads: N tasks in this JVM, from the first server bound to every task joined
 *       (median of 3 runs);
 *   <li>kv: calls per second against the leader from 1 and 4 client tasks, each next to a
 *       baseline measured just before and after it in the same run: {@code GetTaskState}, a
 *       small read-only call to the same service ({@code ratio} = op rate / baseline rate).
 * </ul>
 */
final class CoordinationBench {

  private static final Security SECURITY = Security.of(JobToken.of("bench-token"));
  private static final CoordinationOptions OPTIONS = CoordinationOptions.DEFAULTS
      .withJoinTimeout(Duration.ofMinutes(2)).withShutdownBarrierTimeout(Duration.ofSeconds(60));

  private CoordinationBench() {}

  /** The benchmark as its options ask, checked first. */
  static Bench.Job parse(List<String> args) {
    Map<String, String> defaults = new LinkedHashMap<>();
    defaults.put("--processes", "2,4,8");
    defaults.put("--threads", "2,4,8,16,64");
    defaults.put("--seconds", "1");
    CommandOptions options = CommandOptions.parse(args, defaults, java.util.Set.of());
    List<Integer> processes = options.positiveInts("--processes");
    List<Integer> threads = options.positiveInts("--threads");
    Duration seconds = Duration.ofSeconds(options.positiveInt("--seconds"));
    return () -> {
      for (int n : processes) {
        joinProcesses(n);
      }
      for (int n : threads) {
        joinThreads(n);
      }
      keyValue(seconds);
    };
  }

  private static void joinProcesses(int n) throws Exception {
    ClusterSpec cluster = Children.localWorkers(n);
    List<Process> children = new ArrayList<>();
    long start = System.nanoTime();
    try {
      for (int i = 0; i < n; i++) {
        ProcessBuilder builder = new ProcessBuilder(Path.of(System.getProperty("java.home"), "bin", "java").toString(),
            "-Xmx128m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-cp", System.getProperty("java.class.path"),
            JoinOnce.class.getName()).redirectError(ProcessBuilder.Redirect.INHERIT);
        builder.environment().put("TF_CONFIG", TfConfig.of(cluster, new TaskId("worker", i)).toJson());
        builder.environment().put(JobToken.ENV, "bench-token");
        children.add(builder.start());
      }
      long maxJoin = 0;
      long maxStartup = 0;
      long lastJoined = 0;
      for (Process child : children) {
        BufferedReader out = new BufferedReader(new InputStreamReader(child.getInputStream(), StandardCharsets.UTF_8));
        String line = out.readLine();
        if (line == null || !line.startsWith("JOINED ")) {
          throw new IllegalStateException("a benchmark task failed (exit " + child.waitFor() + "): " + line);
        }
        lastJoined = Math.max(lastJoined, System.nanoTime());
        String[] parts = line.split(" ");
        maxJoin = Math.max(maxJoin, Long.parseLong(parts[1]));
        maxStartup = Math.max(maxStartup, Long.parseLong(parts[2]));
      }
      for (Process child : children) {
        if (!child.waitFor(90, TimeUnit.SECONDS)) {
          throw new IllegalStateException("a benchmark task did not exit");
        }
      }
      emit(Map.of("bench", "join", "mode", "processes", "tasks", n,
          "wall_ms", Duration.ofNanos(lastJoined - start).toMillis(), "max_join_ms", maxJoin,
          "max_runtime_start_ms", maxStartup));
    } finally {
      children.forEach(Process::destroyForcibly);
    }
  }

  private static void joinThreads(int n) throws Exception {
    List<Long> runs = new ArrayList<>();
    for (int run = 0; run < 3; run++) {
      long start = System.nanoTime();
      try (Job job = Job.start(n)) {
        job.joinAll();
        runs.add(System.nanoTime() - start);
        job.shutdownAll();
      }
    }
    runs.sort(null);
    emit(Map.of("bench", "join", "mode", "threads", "tasks", n, "median_ms", Duration.ofNanos(runs.get(1)).toMillis(),
        "runs_ms", runs.stream().map(r -> Duration.ofNanos(r).toMillis()).toList()));
  }

  private static void keyValue(Duration each) throws Exception {
    try (Job job = Job.start(4)) {
      job.joinAll();
      for (int clients : new int[] {1, 4}) {
        List<CoordinationAgent> agents = job.runtimes.subList(0, clients).stream().map(TaskRuntime::agent).toList();
        agents.get(0).insert("bench/existing", new byte[64], true);
        Consumer<CoordinationAgent> baseline = CoordinationAgent::taskStates;
        Map<String, Consumer<CoordinationAgent>> ops = new LinkedHashMap<>();
        ops.put("insert", a -> a.insert("bench/k/" + a.task().index(), new byte[64], true));
        ops.put("get", a -> a.get("bench/existing", Duration.ofSeconds(10)));
        ops.put("try_get", a -> a.tryGet("bench/existing"));
        ops.put("increment", a -> a.increment("bench/counter", 1));
        ops.put("get_dir_16", a -> a.getDir("bench/dir"));
        for (int i = 0; i < 16; i++) {
          agents.get(0).insert("bench/dir/" + i, new byte[64], true);
        }
        // Warm-up: every call once for a while, so the JIT does not favour whichever is measured last.
        rate(agents, each, baseline);
        ops.values().forEach(op -> rate(agents, each, op));
        for (Map.Entry<String, Consumer<CoordinationAgent>> op : ops.entrySet()) {
          // The baseline is measured right before and after each op, so drift on a shared machine cancels out.
          double before = rate(agents, each, baseline);
          double rate = rate(agents, each, op.getValue());
          double after = rate(agents, each, baseline);
          emit(Map.of("bench", "kv", "op", op.getKey(), "clients", clients, "ops_per_s", Math.round(rate),
              "baseline_ops_per_s", Math.round((before + after) / 2),
              "ratio", Math.round(rate / ((before + after) / 2) * 100) / 100.0));
        }
      }
      job.shutdownAll();
    }
  }

  /** Calls per second over all clients, after a short warm-up. */
  private static double rate(List<CoordinationAgent> agents, Duration each, Consumer<CoordinationAgent> op) {
    LongAdder calls = new LongAdder();
    long warmUpEnd = System.nanoTime() + Duration.ofMillis(300).toNanos();
    long end = warmUpEnd + each.toNanos();
    CompletableFuture.allOf(agents.stream().map(a -> CompletableFuture.runAsync(() -> {
      while (System.nanoTime() < warmUpEnd) {
        op.accept(a);
      }
      while (System.nanoTime() < end) {
        op.accept(a);
        calls.increment();
      }
    }, r -> new Thread(r, "muster-bench-" + a.task().index()).start())).toArray(CompletableFuture[]::new)).join();
    return calls.sum() / (each.toNanos() / 1e9);
  }

  private static void emit(Map<String, Object> fields) {
    Map<String, Object> ordered = new LinkedHashMap<>();
    for (String key : List.of("bench", "mode", "op", "tasks", "clients", "wall_ms", "max_join_ms", "median_ms",
        "ops_per_s", "baseline_ops_per_s")) {
      if (fields.containsKey(key)) {
        ordered.put(key, fields.get(key));
      }
    }
    fields.forEach(ordered::putIfAbsent);
    System.out.println(Json.write(ordered));
    System.out.flush();
  }

  /** N workers in this JVM, bound before the cluster is assembled, as a launcher does. */
  private static final class Job implements AutoCloseable {
    final List<TaskServer> servers = new ArrayList<>();
    final List<TaskRuntime> runtimes = new ArrayList<>();

    static Job start(int n) {
      Job job = new Job();
      List<String> addresses = new ArrayList<>();
      for (int i = 0; i < n; i++) {
        TaskServer server = TaskServer.start(new TaskId("worker", i), new HostPort("127.0.0.1", 0), SECURITY);
        job.servers.add(server);
        addresses.add(server.address().toString());
      }
      ClusterSpec cluster = ClusterSpec.of(Map.of("worker", addresses));
      for (TaskServer server : job.servers) {
        job.runtimes.add(TaskRuntime.builder(TfConfig.of(cluster, server.task()), SECURITY)
            .server(server).options(OPTIONS).start());
      }
      return job;
    }

    void joinAll() {
      each(TaskRuntime::join);
    }

    void shutdownAll() {
      each(r -> r.agent().shutdown());
    }

    private void each(Consumer<TaskRuntime> step) {
      CompletableFuture.allOf(runtimes.stream().map(r -> CompletableFuture.runAsync(() -> step.accept(r),
          c -> new Thread(c, "muster-bench-task-" + r.task().index()).start())).toArray(CompletableFuture[]::new)).join();
    }

    @Override
    public void close() {
      runtimes.forEach(TaskRuntime::close);
      servers.forEach(TaskServer::close);
    }
  }
}
