package io.muster.strategy;

import io.muster.cluster.ClusterSpec;
import io.muster.cluster.HostPort;
import io.muster.cluster.TaskId;
import io.muster.cluster.TfConfig;
import io.muster.coordination.CoordinationOptions;
import io.muster.rpc.Security;
import io.muster.internal.rpc.TaskServer;
import io.muster.testing.LocalCluster;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.time.Duration;

/**
 * A worker or ps of a parameter-server test job in its own JVM, launched as a launcher would: it
 * binds its port (0, or the one given when it restarts), writes it to {@code <dir>/<job>-<index>.port},
 * waits for the test to write the cluster to {@code <dir>/cluster.json}, and serves.
 * Arguments: dir job index [port].
 */
public final class PsTaskMain {

  static final CoordinationOptions COORDINATION = CoordinationOptions.DEFAULTS
      .withHeartbeatTimeout(Duration.ofSeconds(2)).withJoinTimeout(Duration.ofSeconds(60));

  public static void main(String[] args) throws Exception {
    Path dir = Path.of(args[0]);
    TaskId task = new TaskId(args[1], Integer.parseInt(args[2]));
    int port = args.length > 3 ? Integer.parseInt(args[3]) : 0;
    Security security = Security.of(LocalCluster.TOKEN);
    TaskServer server = bind(task, port, security);
    Path portFile = dir.resolve(task.job() + "-" + task.index() + ".port");
    Path tmp = Files.createTempFile(dir, "port", ".tmp");
    Files.writeString(tmp, Integer.toString(server.port()));
    Files.move(tmp, portFile, StandardCopyOption.ATOMIC_MOVE, StandardCopyOption.REPLACE_EXISTING);
    Path clusterFile = dir.resolve("cluster.json");
    long deadline = System.nanoTime() + Duration.ofSeconds(60).toNanos();
    while (!Files.exists(clusterFile)) {
      if (System.nanoTime() > deadline) {
        System.out.println(task + ": no cluster.json within 60 s");
        System.exit(3);
      }
      Thread.sleep(20);
    }
    ClusterSpec cluster = TfConfig.parse(Files.readString(clusterFile)).cluster();
    try (ParameterServerStrategy strategy = ParameterServerStrategy.builder().cluster(cluster, task).security(security)
        .server(server).coordination(COORDINATION).functions(PsJobFunctions.functions()).join()) {
      System.out.println(task + " serving");
      strategy.serve();
      System.out.println(task + " finished");
    } catch (RuntimeException e) {
      System.out.println(task + " failed: " + e.getMessage());
      System.exit(1);
    } finally {
      server.close();
    }
  }

  /** A restarted task takes its old port back; the OS may take a moment to free it. */
  private static TaskServer bind(TaskId task, int port, Security security) throws InterruptedException {
    long deadline = System.nanoTime() + Duration.ofSeconds(10).toNanos();
    while (true) {
      try {
        return TaskServer.start(task, new HostPort("127.0.0.1", port), security);
      } catch (java.io.UncheckedIOException e) {
        if (port == 0 || System.nanoTime() > deadline) {
          throw e;
        }
        Thread.sleep(100);
      }
    }
  }
}
