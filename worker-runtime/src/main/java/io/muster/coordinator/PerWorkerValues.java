package io.muster.coordinator;

import java.util.List;

/**
 * A resource created on every worker ({@link ClusterCoordinator#createPerWorkerResource}). Pass it
 * as an argument to {@link ClusterCoordinator#schedule}: the function receives the resource of the
 * worker it runs on ({@link WorkerContext#resource}). A worker that comes back after a failure
 * creates it again before running anything else.
 */
public final class PerWorkerValues {

  private final long id;
  private final List<RemoteValue> created;

  PerWorkerValues(long id, List<RemoteValue> created) {
    this.id = id;
    this.created = List.copyOf(created);
  }

  long id() {
    return id;
  }

  /** Per worker (by index), ready once that worker has created its resource. */
  public List<RemoteValue> values() {
    return created;
  }
}
