package io.muster.coordinator;

import java.util.List;

/**
 * Creates a per-worker resource (a data iterator, a local cache) on a worker; the object stays on
 * that worker, and functions reach it through {@link WorkerContext#resource}. It is created again
 * when a worker comes back after a failure.
 */
@FunctionalInterface
public interface ResourceFunction {
  Object create(WorkerContext worker, List<Value> args) throws Exception;
}
