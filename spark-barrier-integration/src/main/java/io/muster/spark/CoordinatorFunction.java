package io.muster.spark;

import io.muster.coordinator.ClusterCoordinator;
import io.muster.coordinator.Functions;
import java.io.Serializable;

/**
 * What the chief of a parameter-server gang runs ({@link BarrierTrainer#coordinate}): create the
 * variables and schedule the functions. Its return value goes back to the driver.
 */
@FunctionalInterface
public interface CoordinatorFunction<R extends Serializable> extends Serializable {
  R coordinate(ClusterCoordinator coordinator) throws Exception;

  /** Builds the job's {@link Functions} on each executor: lambdas do not travel, their factory does. */
  @FunctionalInterface
  interface Registry extends Serializable {
    Functions create();
  }
}
