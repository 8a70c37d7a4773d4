package io.muster.launch;

import io.muster.cluster.ClusterSpec;
import io.muster.cluster.HostPort;
import io.muster.cluster.Roles;
import io.muster.cluster.TaskId;
import io.muster.cluster.TaskType;
import io.muster.cluster.TfConfig;
import java.io.Serializable;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * A formed gang: its {@link GangSpec} and the address every member bound, in member order. Every
 * task that builds a {@code Gang} from the same addresses gets the same cluster, so a launcher only
 * has to gather the addresses (Spark's {@code allGather}, the YARN ApplicationMaster's
 * registrations) and hand them here.
 *
 * <p>The cluster holds the chief, worker and ps jobs. The evaluator is not in it (TensorFlow's
 * {@code _split_cluster_for_evaluator}: the other tasks' servers never see it); only its own
 * {@code TF_CONFIG} names it, beside the cluster it evaluates.
 */
public record Gang(GangSpec spec, List<HostPort> addresses) implements Serializable {

  public Gang {
    addresses = List.copyOf(addresses);
    if (addresses.size() != spec.size()) {
      throw new IllegalArgumentException("the gang " + spec + " has " + spec.size() + " members but "
          + addresses.size() + " addresses were gathered");
    }
  }

  public TaskId task(int member) {
    return spec.task(member);
  }

  public HostPort address(TaskId task) {
    return addresses.get(spec.member(task));
  }

  /** The cluster every task but the evaluator sees: chief, worker and ps jobs. */
  public ClusterSpec cluster() {
    return clusterOf(false);
  }

  /** The {@code TF_CONFIG} of member {@code m}. */
  public TfConfig tfConfig(int member) {
    TaskId task = task(member);
    return TfConfig.of(clusterOf(task.is(TaskType.EVALUATOR)), task);
  }

  /**
   * TensorFlow's {@code is_chief} for the member's task: the chief, worker 0 when there is no chief,
   * and the evaluator (a chief of its own); never a ps.
   */
  public boolean isChief(int member) {
    TfConfig config = tfConfig(member);
    return Roles.isChief(config.cluster(), config.requireTask());
  }

  private ClusterSpec clusterOf(boolean withEvaluator) {
    Map<String, List<String>> jobs = new LinkedHashMap<>();
    for (int m = 0; m < spec.size(); m++) {
      TaskId task = spec.task(m);
      if (withEvaluator || !task.is(TaskType.EVALUATOR)) {
        jobs.computeIfAbsent(task.job(), job -> new ArrayList<>()).add(addresses.get(m).toString());
      }
    }
    return ClusterSpec.of(jobs);
  }
}
