package io.muster.cluster;

import io.muster.internal.Json;
import java.math.BigDecimal;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.OptionalInt;
import java.util.stream.Collectors;

/**
 * The {@code TF_CONFIG} environment variable, read and written with the semantics of
 * TensorFlow's {@code TFConfigClusterResolver}.
 *
 * <p>{@code cluster} jobs may be dense lists or sparse index maps; {@code task.type} is cast to a
 * string and {@code task.index} to an integer (so {@code "1"} is 1); {@code rpc_layer} and
 * {@code session_master} are optional and {@code environment} is ignored. Where TensorFlow would
 * accept a description that cannot work, such as a task index outside its job or a task type that
 * is not a job of the cluster, {@link #parse} fails with a {@link ClusterConfigException} naming
 * the field and the value.
 */
public record TfConfig(
    ClusterSpec cluster,
    Optional<String> taskType,
    OptionalInt taskIndex,
    Optional<String> rpcLayer,
    Optional<String> sessionMaster) {

  public static final String ENV = "TF_CONFIG";

  public TfConfig {
    if (cluster == null || taskType == null || taskIndex == null || rpcLayer == null || sessionMaster == null) {
      throw new NullPointerException("TfConfig components must not be null; use empty optionals");
    }
  }

  /** The config of a task, as a launcher builds it. */
  public static TfConfig of(ClusterSpec cluster, TaskId task) {
    TfConfig config = new TfConfig(cluster, Optional.of(task.job()), OptionalInt.of(task.index()),
        Optional.empty(), Optional.empty());
    config.checkTaskInCluster();
    return config;
  }

  /** {@code TF_CONFIG} from an environment; an unset or blank variable is {@code {}}, as in TensorFlow. */
  public static TfConfig fromEnvironment(Map<String, String> environment) {
    return parse(environment.get(ENV));
  }

  /**
   * Parses {@code TF_CONFIG} text.
   *
   * @throws ClusterConfigException for malformed JSON or a field of the wrong shape, with the
   *     field's path ({@code TF_CONFIG cluster.worker[1]}) and its value in the message
   */
  public static TfConfig parse(String json) {
    if (json == null || json.isBlank()) {
      return new TfConfig(ClusterSpec.empty(), Optional.empty(), OptionalInt.empty(), Optional.empty(), Optional.empty());
    }
    Object root;
    try {
      root = Json.parse(json);
    } catch (Json.JsonException e) {
      throw new ClusterConfigException("TF_CONFIG is not valid JSON: " + e.getMessage());
    }
    Map<?, ?> top = asObject(root, "TF_CONFIG");
    ClusterSpec cluster = top.get("cluster") == null ? ClusterSpec.empty() : parseCluster(top.get("cluster"));

    Optional<String> type = Optional.empty();
    OptionalInt index = OptionalInt.empty();
    if (top.get("task") != null) {
      Map<?, ?> task = asObject(top.get("task"), "TF_CONFIG task");
      type = Optional.ofNullable(task.get("type")).map(TfConfig::typeString);
      Object rawIndex = task.get("index");
      if (rawIndex != null) {
        index = OptionalInt.of(parseIndex(rawIndex, "TF_CONFIG task.index"));
      }
    }
    TfConfig config = new TfConfig(cluster, type, index,
        optionalString(top, "rpc_layer"), optionalString(top, "session_master"));
    config.checkTaskInCluster();
    return config;
  }

  /** This task, as {@code run_standard_tensorflow_server} reads it: the index defaults to 0. */
  public TaskId requireTask() {
    if (taskType.isEmpty() && taskIndex.isEmpty()) {
      throw new ClusterConfigException("\"task\" is not found in TF_CONFIG.");
    }
    if (taskType.isEmpty()) {
      throw new ClusterConfigException("\"task_type\" is not found in the `task` part of TF_CONFIG.");
    }
    return new TaskId(taskType.get(), taskIndex.orElse(0));
  }

  /** The same config for another task (the resolver's {@code task_type}/{@code task_id} overrides). */
  public TfConfig withTask(TaskId task) {
    TfConfig config = new TfConfig(cluster, Optional.of(task.job()), OptionalInt.of(task.index()), rpcLayer, sessionMaster);
    config.checkTaskInCluster();
    return config;
  }

  public TfConfig withRpcLayer(String layer) {
    return new TfConfig(cluster, taskType, taskIndex, Optional.ofNullable(layer), sessionMaster);
  }

  /** TensorFlow's {@code master()} for this task. */
  public String master() {
    return master(taskType.orElse(null), taskIndex.isPresent() ? taskIndex.getAsInt() : null, rpcLayer.orElse(null));
  }

  /**
   * TensorFlow's {@code master(task_type, task_id, rpc_layer)}: {@code session_master} verbatim
   * when set; {@code ""} for an empty cluster or a single task; otherwise the task's address,
   * prefixed with {@code rpc_layer://} when the layer is non-empty.
   */
  public String master(String type, Integer index, String layer) {
    if (sessionMaster.isPresent()) {
      return sessionMaster.get();
    }
    if (cluster.isEmpty() || (cluster.jobs().size() == 1 && cluster.allTasks().size() == 1)) {
      return "";
    }
    if (type == null || !cluster.hasJob(type)) {
      throw new ClusterConfigException("No such job in cluster: " + (type == null ? "None" : "'" + type + "'"));
    }
    if (index == null) {
      throw new ClusterConfigException("No task with index None in job '" + type + "'");
    }
    String address = cluster.taskAddress(new TaskId(type, index));
    return layer == null || layer.isEmpty() ? address : layer + "://" + address;
  }

  /** Renders {@code TF_CONFIG} JSON that {@link #parse} (and TensorFlow) reads back to an equal config. */
  public String toJson() {
    Map<String, Object> out = new LinkedHashMap<>();
    out.put("cluster", cluster.asDict());
    if (taskType.isPresent() || taskIndex.isPresent()) {
      Map<String, Object> task = new LinkedHashMap<>();
      taskType.ifPresent(t -> task.put("type", t));
      if (taskIndex.isPresent()) {
        task.put("index", taskIndex.getAsInt());
      }
      out.put("task", task);
    }
    rpcLayer.ifPresent(l -> out.put("rpc_layer", l));
    sessionMaster.ifPresent(m -> out.put("session_master", m));
    return Json.write(out);
  }

  private void checkTaskInCluster() {
    if (cluster.isEmpty() || taskType.isEmpty()) {
      return;
    }
    String type = taskType.get();
    if (!cluster.hasJob(type)) {
      // The evaluator may run outside the cluster it evaluates (multi_worker_util allows it).
      if (!type.equals(TaskType.EVALUATOR.jobName())) {
        throw new ClusterConfigException("TF_CONFIG task.type '" + type + "' is not a job of the cluster (jobs: "
            + String.join(", ", cluster.jobs()) + ")");
      }
      return;
    }
    if (taskIndex.isPresent() && !cluster.contains(new TaskId(type, taskIndex.getAsInt()))) {
      int index = taskIndex.getAsInt();
      var tasks = cluster.tasks(type);
      boolean dense = tasks.lastKey() + 1 == tasks.size();
      throw new ClusterConfigException("TF_CONFIG task.index " + index + " is out of range: job '" + type + "' has "
          + (dense ? tasks.size() + " task" + (tasks.size() == 1 ? "" : "s")
              : "tasks " + tasks.keySet().stream().map(String::valueOf).collect(Collectors.joining(", "))));
    }
  }

  private static ClusterSpec parseCluster(Object raw) {
    Map<?, ?> jobs = asObject(raw, "TF_CONFIG cluster");
    Map<String, Map<Integer, String>> sparse = new LinkedHashMap<>();
    for (Map.Entry<?, ?> job : jobs.entrySet()) {
      String name = (String) job.getKey();
      String path = "TF_CONFIG cluster." + name;
      Map<Integer, String> tasks = new LinkedHashMap<>();
      if (job.getValue() instanceof List<?> list) {
        for (int i = 0; i < list.size(); i++) {
          tasks.put(i, address(list.get(i), path + "[" + i + "]"));
        }
      } else if (job.getValue() instanceof Map<?, ?> map) {
        for (Map.Entry<?, ?> task : map.entrySet()) {
          int index = parseIndex(task.getKey(), path + " key");
          tasks.put(index, address(task.getValue(), path + "." + task.getKey()));
        }
      } else {
        throw new ClusterConfigException("The tasks for job '" + name
            + "' must be a list or a dictionary from integers to strings, was " + describe(job.getValue()));
      }
      if (tasks.isEmpty()) {
        throw new ClusterConfigException(path + " is empty: a job needs at least one \"host:port\"");
      }
      sparse.put(name, tasks);
    }
    try {
      return ClusterSpec.ofSparse(sparse);
    } catch (ClusterConfigException e) {
      throw new ClusterConfigException("TF_CONFIG " + e.getMessage());
    }
  }

  private static String address(Object raw, String path) {
    if (!(raw instanceof String address)) {
      throw new ClusterConfigException(path + " must be a \"host:port\" string, was " + describe(raw));
    }
    try {
      HostPort.parse(address);
    } catch (ClusterConfigException e) {
      throw new ClusterConfigException(path + ": " + e.getMessage());
    }
    return address;
  }

  private static int parseIndex(Object raw, String path) {
    String text = raw instanceof BigDecimal d ? d.toPlainString() : raw instanceof String s ? s.trim() : null;
    if (text != null && text.matches("\\d{1,9}")) {
      return Integer.parseInt(text);
    }
    throw new ClusterConfigException(path + " " + describe(raw) + " is not a task index (a non-negative integer)");
  }

  private static String typeString(Object raw) {
    if (raw instanceof String s) {
      return s;
    }
    if (raw instanceof BigDecimal d) {
      return d.toPlainString();
    }
    throw new ClusterConfigException("TF_CONFIG task.type must be a string, was " + describe(raw));
  }

  private static Optional<String> optionalString(Map<?, ?> top, String key) {
    Object raw = top.get(key);
    if (raw == null) {
      return Optional.empty();
    }
    if (!(raw instanceof String s)) {
      throw new ClusterConfigException("TF_CONFIG " + key + " must be a string, was " + describe(raw));
    }
    return Optional.of(s);
  }

  private static Map<?, ?> asObject(Object raw, String path) {
    if (!(raw instanceof Map<?, ?> map)) {
      throw new ClusterConfigException(path + " must be a JSON object, was " + describe(raw));
    }
    return map;
  }

  private static String describe(Object raw) {
    if (raw == null) {
      return "null";
    }
    if (raw instanceof List<?>) {
      return "a list " + Json.write(raw);
    }
    if (raw instanceof Map<?, ?>) {
      return "an object " + Json.write(raw);
    }
    return Json.write(raw);
  }
}
