package io.muster.testing;

import io.muster.cluster.TfConfig;
import io.muster.coordination.CoordinationOptions;
import io.muster.coordination.TaskRuntime;
import io.muster.rpc.Security;
import java.time.Duration;

/**
 * A task in a child JVM: joins the job from its TF_CONFIG, prints JOINED, then waits until its
 * standard input closes or two minutes pass. Argument: the heartbeat timeout in milliseconds.
 */
public final class JoinAndWait {
  public static void main(String[] args) throws Exception {
    CoordinationOptions options = CoordinationOptions.DEFAULTS
        .withHeartbeatTimeout(Duration.ofMillis(Long.parseLong(args[0])))
        .withJoinTimeout(Duration.ofSeconds(60))
        .withProgressInterval(Duration.ofSeconds(1));
    try (TaskRuntime runtime = TaskRuntime.builder(TfConfig.fromEnvironment(System.getenv()),
        Security.fromEnvironment(System.getenv())).options(options)
        .onError(e -> System.out.println("ERROR-CALLBACK " + e.getMessage())).start()) {
      runtime.join();
      System.out.println("JOINED");
      System.out.flush();
      long end = System.nanoTime() + Duration.ofMinutes(2).toNanos();
      while (System.in.read() >= 0 && System.nanoTime() < end) {
        // wait for the parent to close our stdin
      }
    }
  }
}
