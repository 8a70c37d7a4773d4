package io.muster.testing;

import io.muster.cluster.HostPort;
import io.muster.cluster.TaskId;
import io.muster.cluster.TfConfig;
import io.muster.collective.CollectiveGroup;
import io.muster.collective.Collectives;
import io.muster.collective.CommunicationOptions;
import io.muster.collective.ReduceOp;
import io.muster.coordination.CoordinationOptions;
import io.muster.internal.coordination.TaskRuntime;
import io.muster.rpc.Security;
import io.muster.internal.rpc.TaskServer;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.time.Duration;

/**
 * A rank in a child JVM: binds its task server on a free port and prints {@code BOUND host:port},
 * reads its TF_CONFIG (one line of JSON) from standard input, joins, sets up collectives, prints
 * READY, then all-reduces {@code args[0]} floats forever.
 * Arguments: the float count, the task's job and index.
 */
public final class AllReduceLoop {
  public static void main(String[] args) throws Exception {
    Security security = Security.fromEnvironment(System.getenv());
    BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
    try (TaskServer server = TaskServer.start(new TaskId(args[1], Integer.parseInt(args[2])),
        new HostPort("127.0.0.1", 0), security)) {
      System.out.println("BOUND " + server.address());
      System.out.flush();
      TfConfig config = TfConfig.parse(in.readLine());
      try (TaskRuntime runtime = TaskRuntime.builder(config, security).server(server)
          .options(CoordinationOptions.DEFAULTS.withJoinTimeout(Duration.ofSeconds(60))).start()) {
        runtime.join();
        try (Collectives c = Collectives.create(CollectiveGroup.of(config.cluster(), runtime.task()), "test",
            "127.0.0.1", runtime.agent(), security, CommunicationOptions.DEFAULTS, Duration.ofSeconds(5))) {
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
}
