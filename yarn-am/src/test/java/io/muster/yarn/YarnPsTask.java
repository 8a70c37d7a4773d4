package io.muster.yarn;

import io.muster.coordinator.ClusterCoordinator;
import io.muster.coordinator.Functions;
import io.muster.coordinator.RemoteValue;
import io.muster.coordinator.Value;
import io.muster.ps.Optimizer;
import io.muster.strategy.ParameterServerStrategy;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.TreeSet;

/**
 * A parameter-server job as a YARN task's command: every task joins through
 * {@link ParameterServerStrategy} from the {@code TF_CONFIG} and token the executor gives it; the
 * chief creates a counter on the ps, schedules 40 increments on the workers and prints what it
 * counted; the workers and the ps serve until it is done.
 */
public final class YarnPsTask {
  private YarnPsTask() {}

  public static void main(String[] args) {
    Functions functions = Functions.builder().function("count", (worker, a) -> {
      worker.variable("count").assignAdd(new float[] {1f});
      return Value.of((long) worker.task().index());
    }).build();
    try (ParameterServerStrategy strategy = ParameterServerStrategy.builder().functions(functions).join()) {
      if (!strategy.isCoordinator()) {
        strategy.serve();
        System.out.println(strategy.taskId() + " served");
        return;
      }
      ClusterCoordinator coordinator = strategy.coordinator();
      coordinator.variables().create("count", new long[] {1}, Optimizer.NONE);
      List<RemoteValue> runs = new ArrayList<>();
      for (int i = 0; i < 40; i++) {
        runs.add(coordinator.schedule("count"));
      }
      coordinator.join();
      Set<Long> workers = new TreeSet<>();
      runs.forEach(r -> workers.add(r.fetch().longValue()));
      System.out.println("counted " + coordinator.variables().variable("count").read()[0] + " on workers " + workers);
    }
  }
}
