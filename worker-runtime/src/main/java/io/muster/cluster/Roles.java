package io.muster.cluster;

import java.util.Optional;

/**
 * The role rules of TensorFlow's {@code multi_worker_util}: which task is the chief, how many
 * workers take part in synchronous training, each task's id among them, and which task leads
 * collectives and the coordination service. Pure functions with TensorFlow's validation and
 * messages; the task type may be {@code null} where TensorFlow allows {@code None}.
 */
public final class Roles {

  private Roles() {}

  /**
   * {@code _validate_cluster_spec}: only chief, worker, evaluator and ps jobs; at most one chief
   * and one evaluator; the task type known and (except the evaluator) in the cluster; the task id
   * below the job's task count.
   */
  public static void validate(ClusterSpec cluster, String taskType, int taskId) {
    for (String job : cluster.jobs()) {
      if (TaskType.ofJobName(job).isEmpty()) {
        throw new ClusterConfigException("Disallowed task type found in cluster spec. Allowed types are "
            + "('chief', 'worker', 'evaluator', 'ps', None) and the cluster spec is " + cluster + ".");
      }
    }
    if (taskType != null && TaskType.ofJobName(taskType).isEmpty()) {
      throw new ClusterConfigException("Unrecognized task_type: '" + taskType
          + "', valid task types are: ('chief', 'worker', 'evaluator', 'ps', None)");
    }
    if (taskType != null && !taskType.isEmpty() && !cluster.hasJob(taskType)
        && !taskType.equals(TaskType.EVALUATOR.jobName())) {
      throw new ClusterConfigException("`task_type` '" + taskType + "' not found in cluster_spec.");
    }
    if (cluster.numTasks(TaskType.CHIEF) > 1) {
      throw new ClusterConfigException("There must be at most one 'chief' job.");
    }
    if (cluster.numTasks(TaskType.EVALUATOR) > 1) {
      throw new ClusterConfigException("There must be at most one 'evaluator' job.");
    }
    if (taskType != null && cluster.hasJob(taskType) && taskId >= cluster.numTasks(taskType)) {
      throw new ClusterConfigException("The `task_id` " + taskId + " exceeds the maximum id of " + taskType + ".");
    }
  }

  /** The chief, or the evaluator (a chief of its own), or worker 0 when there is no chief; never a ps. */
  public static boolean isChief(ClusterSpec cluster, String taskType, int taskId) {
    validate(cluster, taskType, taskId);
    if (TaskType.CHIEF.jobName().equals(taskType) || TaskType.EVALUATOR.jobName().equals(taskType)) {
      return true;
    }
    return !cluster.hasJob(TaskType.CHIEF) && TaskType.WORKER.jobName().equals(taskType) && taskId == 0;
  }

  public static boolean isChief(ClusterSpec cluster, TaskId task) {
    return isChief(cluster, task.job(), task.index());
  }

  /** Chief plus workers taking part in synchronous training; for the evaluator, the evaluators. */
  public static int workerCount(ClusterSpec cluster, String taskType) {
    validate(cluster, taskType, 0);
    if (TaskType.EVALUATOR.jobName().equals(taskType)) {
      return cluster.numTasks(TaskType.EVALUATOR);
    }
    if (!TaskType.CHIEF.jobName().equals(taskType) && !TaskType.WORKER.jobName().equals(taskType)) {
      throw new ClusterConfigException("Unexpected `task_type` " + (taskType == null ? "None" : "'" + taskType + "'"));
    }
    return cluster.numTasks(TaskType.CHIEF) + cluster.numTasks(TaskType.WORKER);
  }

  /** The task's rank among chief and workers: chief 0, worker i is i + number of chiefs; evaluator i is i. */
  public static int idInCluster(ClusterSpec cluster, String taskType, int taskId) {
    validate(cluster, taskType, taskId);
    if (TaskType.CHIEF.jobName().equals(taskType)) {
      return 0;
    }
    if (TaskType.WORKER.jobName().equals(taskType)) {
      return taskId + cluster.numTasks(TaskType.CHIEF);
    }
    if (TaskType.EVALUATOR.jobName().equals(taskType)) {
      return taskId;
    }
    throw new ClusterConfigException("There is no id for task_type " + (taskType == null ? "None" : "'" + taskType + "'"));
  }

  /** Whether {@link #idInCluster} is defined for the task (it is not for a ps or an unknown job). */
  public static Optional<Integer> idInClusterIfAny(ClusterSpec cluster, TaskId task) {
    if (task.is(TaskType.CHIEF) || task.is(TaskType.WORKER) || task.is(TaskType.EVALUATOR)) {
      return Optional.of(idInCluster(cluster, task.job(), task.index()));
    }
    validate(cluster, task.job(), task.index());
    return Optional.empty();
  }

  /** The collective group leader's device name, {@code ""} for an empty cluster or the evaluator. */
  public static String collectiveLeader(ClusterSpec cluster, String taskType, int taskId) {
    return collectiveLeaderTask(cluster, taskType, taskId).map(TaskId::fullName).orElse("");
  }

  public static Optional<TaskId> collectiveLeaderTask(ClusterSpec cluster, String taskType, int taskId) {
    if (cluster.isEmpty()) {
      return Optional.empty();
    }
    validate(cluster, taskType, taskId);
    if (TaskType.EVALUATOR.jobName().equals(taskType)) {
      return Optional.empty();
    }
    return Optional.of(TaskId.of(cluster.hasJob(TaskType.CHIEF) ? TaskType.CHIEF : TaskType.WORKER, 0));
  }

  /** The coordination service leader's device name: ps 0 if any ps, else the chief, else worker 0. */
  public static String coordinationLeader(ClusterSpec cluster) {
    return coordinationLeaderTask(cluster).map(TaskId::fullName).orElse("");
  }

  public static Optional<TaskId> coordinationLeaderTask(ClusterSpec cluster) {
    if (cluster.isEmpty()) {
      return Optional.empty();
    }
    TaskType leader = cluster.hasJob(TaskType.PS) ? TaskType.PS
        : cluster.hasJob(TaskType.CHIEF) ? TaskType.CHIEF : TaskType.WORKER;
    return Optional.of(TaskId.of(leader, 0));
  }
}
