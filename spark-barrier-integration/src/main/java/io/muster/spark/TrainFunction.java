package io.muster.spark;

import java.io.Serializable;

/**
 * What each barrier task runs: training on its partition, with the strategy joined to every other
 * task. The chief's return value goes back to the driver; the others' are dropped.
 */
@FunctionalInterface
public interface TrainFunction<T, R extends Serializable> extends Serializable {
  R train(TrainContext<T> context) throws Exception;
}
