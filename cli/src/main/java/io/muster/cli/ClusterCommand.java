package io.muster.cli;

import io.muster.internal.CommandOptions;
import io.muster.cluster.ClusterSpec;
import io.muster.internal.Json;
import io.muster.cluster.Roles;
import io.muster.cluster.TaskId;
import io.muster.cluster.TaskType;
import io.muster.cluster.TfConfig;
import java.io.PrintStream;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;

/** {@code muster cluster}: this task's identity from {@code TF_CONFIG}, as one JSON object. */
final class ClusterCommand {
  private ClusterCommand() {}

  static int run(List<String> args, Map<String, String> env, PrintStream out) {
    CommandOptions.parse(args, Set.of(), Set.of());
    out.println(Json.write(identity(requireTfConfig(env))));
    return 0;
  }

  static TfConfig requireTfConfig(Map<String, String> env) {
    String raw = env.get(TfConfig.ENV);
    if (raw == null || raw.isBlank()) {
      throw new UsageException("TF_CONFIG is not set: export TF_CONFIG='{\"cluster\": {\"worker\": [\"host:port\", ...]}, "
          + "\"task\": {\"type\": \"worker\", \"index\": 0}}'");
    }
    return TfConfig.parse(raw);
  }

  /**
   * The fields, with TensorFlow's rules: {@code id_in_cluster} is null for a ps (TensorFlow has
   * none); {@code num_workers} is the evaluators for an evaluator and chief plus workers otherwise.
   */
  static Map<String, Object> identity(TfConfig config) {
    TaskId task = config.requireTask();
    ClusterSpec cluster = config.cluster();
    Roles.validate(cluster, task.job(), task.index());
    Map<String, Object> out = new LinkedHashMap<>();
    out.put("task_type", task.job());
    out.put("task_id", task.index());
    out.put("rpc_layer", config.rpcLayer().orElse(null));
    out.put("master", config.master());
    out.put("is_chief", Roles.isChief(cluster, task));
    out.put("id_in_cluster", Roles.idInClusterIfAny(cluster, task).orElse(null));
    out.put("num_workers", task.is(TaskType.EVALUATOR) ? Roles.workerCount(cluster, task.job())
        : cluster.numTasks(TaskType.CHIEF) + cluster.numTasks(TaskType.WORKER));
    out.put("collective_leader", Roles.collectiveLeader(cluster, task.job(), task.index()));
    out.put("coordination_leader", Roles.coordinationLeader(cluster));
    out.put("cluster", cluster.asDict());
    return out;
  }
}
