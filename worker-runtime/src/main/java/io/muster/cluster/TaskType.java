package io.muster.cluster;

import java.util.Optional;

/**
 * The job names that TensorFlow's distribution strategies accept
 * ({@code multi_worker_util._validate_cluster_spec}). The cluster resolver itself accepts
 * any job name; these four are the ones with role rules.
 */
public enum TaskType {
  CHIEF("chief"),
  WORKER("worker"),
  EVALUATOR("evaluator"),
  PS("ps");

  private final String jobName;

  TaskType(String jobName) {
    this.jobName = jobName;
  }

  public String jobName() {
    return jobName;
  }

  public static Optional<TaskType> ofJobName(String jobName) {
    for (TaskType t : values()) {
      if (t.jobName.equals(jobName)) {
        return Optional.of(t);
      }
    }
    return Optional.empty();
  }
}
