package io.muster.bench;

import io.muster.cluster.TfConfig;
import io.muster.coordination.CoordinationOptions;
import io.muster.internal.coordination.TaskRuntime;
import io.muster.rpc.Security;
import java.time.Duration;

/** A benchmark task in its own JVM: joins from TF_CONFIG, prints {@code JOINED <ms>}, leaves with the others. */
public final class JoinOnce {
  private JoinOnce() {}

  public static void main(String[] args) {
    long start = System.nanoTime();
    CoordinationOptions options = CoordinationOptions.DEFAULTS.withJoinTimeout(Duration.ofMinutes(2))
        .withShutdownBarrierTimeout(Duration.ofSeconds(60));
    try (TaskRuntime runtime = TaskRuntime.builder(TfConfig.fromEnvironment(System.getenv()),
        Security.fromEnvironment(System.getenv())).options(options).start()) {
      long started = System.nanoTime();
      runtime.join();
      long joined = System.nanoTime();
      System.out.println("JOINED " + Duration.ofNanos(joined - started).toMillis() + " "
          + Duration.ofNanos(started - start).toMillis());
      System.out.flush();
      runtime.agent().shutdown();
    }
  }
}
