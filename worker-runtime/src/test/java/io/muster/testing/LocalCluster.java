package io.muster.testing;

import io.muster.cluster.ClusterSpec;
import io.muster.cluster.HostPort;
import io.muster.cluster.TaskId;
import io.muster.cluster.TfConfig;
import io.muster.coordination.CoordinationException;
import io.muster.coordination.CoordinationOptions;
import io.muster.internal.coordination.TaskRuntime;
import io.muster.rpc.JobToken;
import io.muster.rpc.Security;
import io.muster.internal.rpc.TaskServer;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;

/**
 * Tasks of one job in this JVM, each with its own server on 127.0.0.1 bound to a free port before
 * the cluster is assembled (as a launcher does), each agent's errors collected per task.
 */
public final class LocalCluster implements AutoCloseable {

  public static final JobToken TOKEN = JobToken.of("test-token-0123456789");

  private final ClusterSpec cluster;
  private final Map<TaskId, TaskRuntime> runtimes = new LinkedHashMap<>();
  private final List<TaskServer> servers = new ArrayList<>();
  private final Map<TaskId, List<CoordinationException>> errors = new ConcurrentHashMap<>();

  private LocalCluster(ClusterSpec cluster) {
    this.cluster = cluster;
  }

  /** Workers 0..n-1, all started (not joined). */
  public static LocalCluster workers(int n, CoordinationOptions options) {
    return workers(n, options, Security.of(TOKEN));
  }

  /** Workers 0..n-1 whose servers use {@code security} (its token must be {@link #TOKEN}). */
  public static LocalCluster workers(int n, CoordinationOptions options, Security security) {
    List<TaskId> tasks = new ArrayList<>();
    for (int i = 0; i < n; i++) {
      tasks.add(new TaskId("worker", i));
    }
    return start(tasks, options, security);
  }

  public static LocalCluster start(List<TaskId> tasks, CoordinationOptions options) {
    return start(tasks, options, Security.of(TOKEN));
  }

  private static LocalCluster start(List<TaskId> tasks, CoordinationOptions options, Security security) {
    Map<String, Map<Integer, String>> jobs = new LinkedHashMap<>();
    List<TaskServer> servers = new ArrayList<>();
    for (TaskId task : tasks) {
      TaskServer server = TaskServer.start(task, new HostPort("127.0.0.1", 0), security);
      servers.add(server);
      jobs.computeIfAbsent(task.job(), j -> new LinkedHashMap<>()).put(task.index(), server.address().toString());
    }
    LocalCluster local = new LocalCluster(ClusterSpec.ofSparse(jobs));
    local.servers.addAll(servers);
    for (TaskServer server : servers) {
      TaskId task = server.task();
      local.errors.put(task, new CopyOnWriteArrayList<>());
      local.runtimes.put(task, TaskRuntime.builder(TfConfig.of(local.cluster, task), security)
          .server(server).options(options).onError(local.errors.get(task)::add).start());
    }
    return local;
  }

  public ClusterSpec cluster() {
    return cluster;
  }

  public TaskRuntime runtime(TaskId task) {
    return runtimes.get(task);
  }

  public TaskRuntime worker(int index) {
    return runtime(new TaskId("worker", index));
  }

  public List<CoordinationException> errors(TaskId task) {
    return errors.get(task);
  }

  /** Joins the given tasks concurrently; rethrows the first failure. */
  public void join(List<TaskId> tasks) throws Exception {
    ExecutorService pool = Executors.newFixedThreadPool(tasks.size());
    try {
      List<Future<?>> joins = new ArrayList<>();
      for (TaskId task : tasks) {
        joins.add(pool.submit(() -> runtimes.get(task).join()));
      }
      for (Future<?> join : joins) {
        join.get();
      }
    } finally {
      pool.shutdownNow();
    }
  }

  public void joinAll() throws Exception {
    join(new ArrayList<>(runtimes.keySet()));
  }

  /** Closes one task's runtime and server, as if its process had gone away. */
  public void stop(TaskId task) {
    runtimes.get(task).close();
    servers.stream().filter(s -> s.task().equals(task)).forEach(TaskServer::close);
  }

  /** Closes the tasks in reverse order, so the leader (usually first) goes last. */
  @Override
  public void close() {
    List<TaskRuntime> reversed = new ArrayList<>(runtimes.values());
    java.util.Collections.reverse(reversed);
    reversed.forEach(TaskRuntime::close);
    servers.forEach(TaskServer::close);
  }
}
