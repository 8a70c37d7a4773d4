package io.muster.collective;

import io.muster.cluster.ClusterSpec;
import io.muster.cluster.Roles;
import io.muster.cluster.TaskId;
import io.muster.cluster.TaskType;
import java.util.ArrayList;
import java.util.List;

/**
 * The tasks taking part in collectives and this task's rank: chief and workers, ranked by
 * TensorFlow's {@code id_in_cluster} (chief 0, then worker i at i + number of chiefs).
 */
public record CollectiveGroup(List<TaskId> members, int rank) {

  public CollectiveGroup {
    members = List.copyOf(members);
    if (members.isEmpty()) {
      throw new IllegalArgumentException("a collective group needs at least one member");
    }
    if (rank < 0 || rank >= members.size()) {
      throw new IllegalArgumentException("rank must be in 0.." + (members.size() - 1) + ", was " + rank);
    }
  }

  /** Chief and workers of the cluster, for the given task (which must be one of them). */
  public static CollectiveGroup of(ClusterSpec cluster, TaskId task) {
    List<TaskId> members = new ArrayList<>();
    for (TaskType type : new TaskType[] {TaskType.CHIEF, TaskType.WORKER}) {
      if (cluster.hasJob(type)) {
        cluster.tasks(type.jobName()).keySet().forEach(i -> members.add(TaskId.of(type, i)));
      }
    }
    members.sort((a, b) -> Integer.compare(Roles.idInCluster(cluster, a.job(), a.index()),
        Roles.idInCluster(cluster, b.job(), b.index())));
    int rank = members.indexOf(task);
    if (rank < 0) {
      throw new IllegalArgumentException("task " + task + " is not a chief or worker of the cluster, so it takes no "
          + "part in collectives (members: " + members + ")");
    }
    return new CollectiveGroup(members, rank);
  }

  public int size() {
    return members.size();
  }

  public TaskId self() {
    return members.get(rank);
  }

  public TaskId member(int r) {
    return members.get(Math.floorMod(r, members.size()));
  }
}
