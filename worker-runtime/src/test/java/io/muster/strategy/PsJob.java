package io.muster.strategy;

import io.muster.cluster.ClusterSpec;
import io.muster.cluster.HostPort;
import io.muster.internal.Json;
import io.muster.cluster.TaskId;
import io.muster.coordinator.ClusterCoordinator;
import io.muster.rpc.Security;
import io.muster.internal.rpc.TaskServer;
import io.muster.testing.ChildJvm;
import io.muster.testing.LocalCluster;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

/**
 * A parameter-server job for tests: the chief in this JVM (the test drives its coordinator), and
 * each worker and ps either in this JVM (a thread that serves) or in a child JVM ({@link PsTaskMain})
 * that the test can kill and start again.
 */
final class PsJob implements AutoCloseable {

  private final Path dir;
  private final ClusterSpec cluster;
  private final ParameterServerStrategy chief;
  private final Map<TaskId, ChildJvm> children;
  private final List<TaskServer> servers;
  private final List<CompletableFuture<Void>> serving;

  private PsJob(Path dir, ClusterSpec cluster, ParameterServerStrategy chief, Map<TaskId, ChildJvm> children,
      List<TaskServer> servers, List<CompletableFuture<Void>> serving) {
    this.dir = dir;
    this.cluster = cluster;
    this.chief = chief;
    this.children = children;
    this.servers = servers;
    this.serving = serving;
  }

  static PsJob start(int workers, int ps, Set<TaskId> inChildJvms, Path dir, ClusterCoordinator.Options options) {
    Security security = Security.of(LocalCluster.TOKEN);
    List<TaskId> tasks = new ArrayList<>(List.of(new TaskId("chief", 0)));
    for (int i = 0; i < workers; i++) {
      tasks.add(new TaskId("worker", i));
    }
    for (int i = 0; i < ps; i++) {
      tasks.add(new TaskId("ps", i));
    }
    Map<TaskId, ChildJvm> children = new LinkedHashMap<>();
    Map<TaskId, TaskServer> local = new LinkedHashMap<>();
    for (TaskId task : tasks) {
      if (inChildJvms.contains(task)) {
        children.put(task, ChildJvm.start(task.job() + "-" + task.index(), PsTaskMain.class,
            List.of(dir.toString(), task.job(), Integer.toString(task.index())), Map.of(), dir));
      } else {
        local.put(task, TaskServer.start(task, new HostPort("127.0.0.1", 0), security));
      }
    }
    Map<String, Map<Integer, String>> jobs = new LinkedHashMap<>();
    for (TaskId task : tasks) {
      String address = local.containsKey(task) ? local.get(task).address().toString()
          : "127.0.0.1:" + awaitPort(dir, task, children.get(task));
      jobs.computeIfAbsent(task.job(), j -> new LinkedHashMap<>()).put(task.index(), address);
    }
    ClusterSpec cluster = ClusterSpec.ofSparse(jobs);
    try {
      Files.writeString(dir.resolve("cluster.json"), Json.write(Map.of("cluster", cluster.asDict())));
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
    List<CompletableFuture<Void>> serving = new ArrayList<>();
    for (Map.Entry<TaskId, TaskServer> e : local.entrySet()) {
      if (!e.getKey().job().equals("chief")) {
        serving.add(CompletableFuture.runAsync(() -> {
          try (ParameterServerStrategy s = builder(cluster, e.getKey(), e.getValue(), options).join()) {
            s.serve();
          }
        }, runnable -> {
          Thread t = new Thread(runnable, "test-" + e.getKey().job() + "-" + e.getKey().index());
          t.setDaemon(true);
          t.start();
        }));
      }
    }
    TaskId chiefTask = new TaskId("chief", 0);
    ParameterServerStrategy chief = builder(cluster, chiefTask, local.get(chiefTask), options).join();
    return new PsJob(dir, cluster, chief, children, new ArrayList<>(local.values()), serving);
  }

  private static ParameterServerStrategy.Builder builder(ClusterSpec cluster, TaskId task, TaskServer server,
      ClusterCoordinator.Options options) {
    return ParameterServerStrategy.builder().cluster(cluster, task).security(Security.of(LocalCluster.TOKEN))
        .server(server).coordination(PsTaskMain.COORDINATION).coordinator(options).functions(PsJobFunctions.functions());
  }

  private static int awaitPort(Path dir, TaskId task, ChildJvm child) {
    Path file = dir.resolve(task.job() + "-" + task.index() + ".port");
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
    while (!Files.exists(file)) {
      if (!child.process().isAlive() || System.nanoTime() > deadline) {
        throw new AssertionError(task + " did not report its port; output:\n" + child.output());
      }
      sleep(20);
    }
    try {
      return Integer.parseInt(Files.readString(file).trim());
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  ParameterServerStrategy chief() {
    return chief;
  }

  ClusterCoordinator coordinator() {
    return chief.coordinator();
  }

  ClusterSpec cluster() {
    return cluster;
  }

  ChildJvm child(TaskId task) {
    return children.get(task);
  }

  /** SIGKILL, as a crash or a preemption. */
  void kill(TaskId task) {
    children.get(task).kill();
  }

  /** Starts the task again in a new JVM on its old port, with the same cluster. */
  ChildJvm restart(TaskId task) {
    String port = Integer.toString(HostPort.parse(cluster.taskAddress(task)).port());
    ChildJvm child = ChildJvm.start(task.job() + "-" + task.index() + "-restarted", PsTaskMain.class,
        List.of(dir.toString(), task.job(), Integer.toString(task.index()), port), Map.of(), dir);
    children.put(task, child);
    return child;
  }

  /** Closes the chief (which finishes the job); waits for the serving tasks; kills children still running. */
  @Override
  public void close() {
    try {
      chief.close();
      for (CompletableFuture<Void> s : serving) {
        try {
          s.get(30, TimeUnit.SECONDS);
        } catch (Exception e) {
          // A test that killed a task expects some servers to fail; what matters here is that none is left.
        }
      }
    } finally {
      children.values().forEach(ChildJvm::close);
      servers.forEach(TaskServer::close);
    }
  }

  private static void sleep(long ms) {
    try {
      Thread.sleep(ms);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new AssertionError("interrupted", e);
    }
  }

  /** Waits for a child to print a line. */
  static void await(ChildJvm child, String text) {
    child.awaitOutput(text, Duration.ofSeconds(60));
  }
}
