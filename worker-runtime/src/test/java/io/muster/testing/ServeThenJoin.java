package io.muster.testing;

import io.muster.cluster.TfConfig;
import io.muster.internal.coordination.TaskRuntime;
import io.muster.rpc.Security;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.time.Duration;
import java.util.List;

/**
 * A task in a child JVM: serves on its TF_CONFIG port and prints SERVING; once a line arrives on
 * its standard input it joins the job, meets the others at a barrier and prints DONE.
 */
public final class ServeThenJoin {
  public static void main(String[] args) throws Exception {
    try (TaskRuntime runtime = TaskRuntime.builder(TfConfig.fromEnvironment(System.getenv()),
        Security.fromEnvironment(System.getenv())).start()) {
      System.out.println("SERVING");
      System.out.flush();
      new BufferedReader(new InputStreamReader(System.in)).readLine();
      runtime.join();
      runtime.agent().barrier("done", Duration.ofSeconds(30), List.of());
      runtime.agent().shutdown();
      System.out.println("DONE");
      System.out.flush();
    }
  }
}
