package io.muster.coordinator;

import io.muster.cluster.TaskId;
import io.muster.ps.ParameterServers;
import io.muster.ps.Variable;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;

/** What a function running on a worker can reach: the task, the job's variables, and this worker's resources. */
public final class WorkerContext {

  private final TaskId task;
  private final ParameterServers variables;
  private final Map<Long, Object> resources = new ConcurrentHashMap<>();

  WorkerContext(TaskId task, ParameterServers variables) {
    this.task = task;
    this.variables = variables;
  }

  public TaskId task() {
    return task;
  }

  public ParameterServers variables() {
    return variables;
  }

  /** The variable of this name (waiting up to the ps call timeout for the coordinator to create it). */
  public Variable variable(String name) {
    return variables.variable(name);
  }

  /**
   * This worker's object for a per-worker resource passed as an argument.
   *
   * @throws IllegalStateException when the value is not a resource this worker created
   */
  public <T> T resource(Value handle, Class<T> type) {
    if (handle.kind() != Value.Kind.RESOURCE) {
      throw new IllegalArgumentException("argument is a " + handle.kind() + " value, not a per-worker resource");
    }
    Object object = resources.get(handle.resourceId());
    if (object == null) {
      throw new IllegalStateException(task + " has no resource " + handle.resourceId()
          + "; per-worker resources are created by ClusterCoordinator.createPerWorkerResource");
    }
    return type.cast(object);
  }

  void putResource(long id, Object object) {
    resources.put(id, object);
  }
}
