package io.muster.testing;

import io.muster.cluster.TfConfig;
import io.muster.collective.CollectiveGroup;
import io.muster.collective.Collectives;
import io.muster.collective.CommunicationOptions;
import io.muster.collective.ReduceOp;
import io.muster.coordination.CoordinationOptions;
import io.muster.coordination.TaskRuntime;
import io.muster.rpc.Security;
import java.time.Duration;

/** A rank in a child JVM: joins, sets up collectives, prints READY, then all-reduces {@code args[0]} floats forever. */
public final class AllReduceLoop {
  public static void main(String[] args) {
    TfConfig config = TfConfig.fromEnvironment(System.getenv());
    Security security = Security.fromEnvironment(System.getenv());
    try (TaskRuntime runtime = TaskRuntime.builder(config, security)
        .options(CoordinationOptions.DEFAULTS.withJoinTimeout(Duration.ofSeconds(60))).start()) {
      runtime.join();
      try (Collectives c = Collectives.create(CollectiveGroup.of(config.cluster(), runtime.task()), "test", "127.0.0.1",
          runtime.agent(), security, CommunicationOptions.DEFAULTS, Duration.ofSeconds(5))) {
        float[] data = new float[Integer.parseInt(args[0])];
        System.out.println("READY");
        System.out.flush();
        while (true) {
          c.allReduce(data, ReduceOp.SUM);
        }
      }
    }
  }
}
