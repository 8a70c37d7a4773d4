package io.muster.bench;

import io.muster.coordination.CoordinationOptions;
import io.muster.coordinator.Functions;
import io.muster.coordinator.Value;
import io.muster.strategy.ParameterServerStrategy;
import java.time.Duration;

/** A worker or ps of {@code muster bench coordinator}, in its own JVM: TF_CONFIG and the token come in the environment. */
public final class CoordinatorBenchTask {

  static final CoordinationOptions COORDINATION = CoordinationOptions.DEFAULTS.withJoinTimeout(Duration.ofMinutes(2));
  static final int MIB_FLOATS = (1 << 20) / Float.BYTES;

  private CoordinatorBenchTask() {}

  /** The benchmark's functions, registered alike on the coordinator and on every worker. */
  static Functions functions() {
    float[] ones = new float[MIB_FLOATS];
    java.util.Arrays.fill(ones, 1f);
    return Functions.builder()
        .function("read_scalar", (worker, args) -> Value.of(worker.variable("scalar").read()[0]))
        .function("assign_add_1mib", (worker, args) -> {
          worker.variable("big").assignAdd(ones);
          return Value.NONE;
        })
        .build();
  }

  public static void main(String[] args) {
    try (ParameterServerStrategy strategy = ParameterServerStrategy.builder().coordination(COORDINATION)
        .functions(functions()).join()) {
      strategy.serve();
    }
  }
}
