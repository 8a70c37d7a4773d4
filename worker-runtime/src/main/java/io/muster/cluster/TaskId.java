package io.muster.cluster;

/**
 * One task of a cluster: a job name and an index within that job.
 *
 * @param job the job name, e.g. {@code "worker"}; any non-empty name, as TensorFlow's
 *     cluster resolver allows
 * @param index the task index, {@code >= 0}
 */
public record TaskId(String job, int index) implements Comparable<TaskId>, java.io.Serializable {

  public TaskId {
    if (job == null || job.isEmpty()) {
      throw new ClusterConfigException("task job name must be non-empty, was " + (job == null ? "null" : "''"));
    }
    if (index < 0) {
      throw new ClusterConfigException("task index must be >= 0, was " + index + " (job '" + job + "')");
    }
  }

  public static TaskId of(TaskType type, int index) {
    return new TaskId(type.jobName(), index);
  }

  /** TensorFlow's device-style name, {@code /job:worker/replica:0/task:2}. */
  public String fullName() {
    return "/job:" + job + "/replica:0/task:" + index;
  }

  public boolean is(TaskType type) {
    return job.equals(type.jobName());
  }

  /** Jobs by name, then tasks by index: the order of {@code ClusterSpec.as_cluster_def()}. */
  @Override
  public int compareTo(TaskId other) {
    int byJob = job.compareTo(other.job);
    return byJob != 0 ? byJob : Integer.compare(index, other.index);
  }

  /** The short form used in messages: {@code worker 2}. */
  @Override
  public String toString() {
    return job + " " + index;
  }
}
