package io.muster.testing;

import io.muster.cluster.HostPort;
import io.muster.cluster.TaskId;
import io.muster.cluster.TfConfig;
import io.muster.coordination.CoordinationOptions;
import io.muster.internal.coordination.TaskRuntime;
import io.muster.rpc.Security;
import io.muster.internal.rpc.TaskServer;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.time.Duration;

/**
 * A task in a child JVM. It binds its task server on a free port first and prints
 * {@code BOUND host:port}; then reads its TF_CONFIG (one line of JSON) from standard input, joins
 * the job, prints JOINED, and waits until its standard input closes or two minutes pass.
 * Arguments: the heartbeat timeout in milliseconds, the task's job and index, and optionally the
 * shutdown barrier's timeout in milliseconds (none by default).
 */
public final class JoinAndWait {
  public static void main(String[] args) throws Exception {
    CoordinationOptions options = CoordinationOptions.DEFAULTS
        .withHeartbeatTimeout(Duration.ofMillis(Long.parseLong(args[0])))
        .withJoinTimeout(Duration.ofSeconds(60))
        .withProgressInterval(Duration.ofSeconds(1))
        .withShutdownBarrierTimeout(Duration.ofMillis(args.length > 3 ? Long.parseLong(args[3]) : 0));
    Security security = Security.fromEnvironment(System.getenv());
    BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
    try (TaskServer server = TaskServer.start(new TaskId(args[1], Integer.parseInt(args[2])),
        new HostPort("127.0.0.1", 0), security)) {
      System.out.println("BOUND " + server.address());
      System.out.flush();
      TfConfig config = TfConfig.parse(in.readLine());
      try (TaskRuntime runtime = TaskRuntime.builder(config, security).server(server).options(options)
          .onError(e -> System.out.println("ERROR-CALLBACK " + e.getMessage())).start()) {
        runtime.join();
        System.out.println("JOINED");
        System.out.flush();
        long end = System.nanoTime() + Duration.ofMinutes(2).toNanos();
        while (in.read() >= 0 && System.nanoTime() < end) {
          // wait for the parent to close our stdin
        }
      }
    }
  }
}
