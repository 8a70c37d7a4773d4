package io.muster.cluster;

import io.muster.internal.Json;
import io.muster.proto.tf.ClusterDef;
import io.muster.proto.tf.JobDef;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.NavigableMap;
import java.util.Set;
import java.util.SortedMap;
import java.util.TreeMap;

/**
 * The jobs of a cluster and the address of every task: TensorFlow's {@code tf.train.ClusterSpec}.
 *
 * <p>Jobs are kept sorted by name and tasks by index, so every task that builds a spec from the
 * same description sees the same order ({@code as_cluster_def()} sorts the same way). A job may
 * be sparse (indices 1 and 3 only). Beyond TensorFlow's own rules, a spec is rejected when a job
 * has no tasks, an address has no integer port, or two tasks share an address, because each of
 * those makes a cluster hang at start-up rather than fail.
 */
public final class ClusterSpec {

  private static final ClusterSpec EMPTY = new ClusterSpec(new TreeMap<>());

  private final SortedMap<String, SortedMap<Integer, String>> jobs;

  private ClusterSpec(SortedMap<String, SortedMap<Integer, String>> jobs) {
    this.jobs = jobs;
  }

  public static ClusterSpec empty() {
    return EMPTY;
  }

  /** A spec from sparse jobs: job name to (task index to address). */
  public static ClusterSpec ofSparse(Map<String, ? extends Map<Integer, String>> jobs) {
    SortedMap<String, SortedMap<Integer, String>> copy = new TreeMap<>();
    Map<String, TaskId> owners = new HashMap<>();
    for (Map.Entry<String, ? extends Map<Integer, String>> job : jobs.entrySet()) {
      String name = job.getKey();
      if (name == null || name.isEmpty()) {
        throw new ClusterConfigException("cluster has a job with an empty name");
      }
      if (job.getValue().isEmpty()) {
        throw new ClusterConfigException("cluster job '" + name + "' has no tasks: give at least one host:port");
      }
      TreeMap<Integer, String> tasks = new TreeMap<>();
      for (Map.Entry<Integer, String> task : job.getValue().entrySet()) {
        TaskId id = new TaskId(name, task.getKey());
        String address = task.getValue();
        try {
          HostPort.parse(address);
        } catch (ClusterConfigException e) {
          throw new ClusterConfigException("cluster task " + id + ": " + e.getMessage());
        }
        TaskId previous = owners.putIfAbsent(address, id);
        if (previous != null) {
          throw new ClusterConfigException("cluster tasks " + previous + " and " + id
              + " have the same address " + address + ": every task needs its own host:port");
        }
        tasks.put(task.getKey(), address);
      }
      copy.put(name, Collections.unmodifiableSortedMap(tasks));
    }
    return copy.isEmpty() ? EMPTY : new ClusterSpec(Collections.unmodifiableSortedMap(copy));
  }

  /** A spec from dense jobs: job name to the addresses of tasks 0, 1, 2, ... */
  public static ClusterSpec of(Map<String, List<String>> jobs) {
    Map<String, Map<Integer, String>> sparse = new LinkedHashMap<>();
    jobs.forEach((name, addresses) -> {
      Map<Integer, String> tasks = new LinkedHashMap<>();
      for (int i = 0; i < addresses.size(); i++) {
        tasks.put(i, addresses.get(i));
      }
      sparse.put(name, tasks);
    });
    return ofSparse(sparse);
  }

  /** Reads TensorFlow's {@code ClusterDef}; the result renders back to an equal {@code ClusterDef}. */
  public static ClusterSpec fromClusterDef(ClusterDef def) {
    Map<String, Map<Integer, String>> sparse = new LinkedHashMap<>();
    for (JobDef job : def.getJobList()) {
      if (sparse.put(job.getName(), job.getTasksMap()) != null) {
        throw new ClusterConfigException("ClusterDef names job '" + job.getName() + "' twice");
      }
    }
    return ofSparse(sparse);
  }

  /** The job names, sorted. */
  public Set<String> jobs() {
    return jobs.keySet();
  }

  public boolean isEmpty() {
    return jobs.isEmpty();
  }

  public boolean hasJob(String job) {
    return jobs.containsKey(job);
  }

  public boolean hasJob(TaskType type) {
    return jobs.containsKey(type.jobName());
  }

  /** The number of tasks of a job, 0 for a job the cluster does not have. */
  public int numTasks(TaskType type) {
    SortedMap<Integer, String> tasks = jobs.get(type.jobName());
    return tasks == null ? 0 : tasks.size();
  }

  /** The number of tasks of a job; unlike the {@link TaskType} overload, a missing job is an error. */
  public int numTasks(String job) {
    return tasksOf(job).size();
  }

  /** Task index to address for one job, sorted by index. */
  public NavigableMap<Integer, String> tasks(String job) {
    return Collections.unmodifiableNavigableMap(new TreeMap<>(tasksOf(job)));
  }

  /** TensorFlow's {@code job_tasks}: a list of length max index + 1 with {@code null} holes. */
  public List<String> jobTasks(String job) {
    SortedMap<Integer, String> tasks = tasksOf(job);
    List<String> list = new ArrayList<>(Collections.nCopies(tasks.lastKey() + 1, (String) null));
    tasks.forEach(list::set);
    return Collections.unmodifiableList(list);
  }

  public boolean contains(TaskId task) {
    SortedMap<Integer, String> tasks = jobs.get(task.job());
    return tasks != null && tasks.containsKey(task.index());
  }

  /**
   * The address of a task.
   *
   * @throws ClusterConfigException {@code No such job in cluster: 'x'} or
   *     {@code No task with index 5 in job 'worker'}, TensorFlow's messages
   */
  public String taskAddress(TaskId task) {
    String address = tasksOf(task.job()).get(task.index());
    if (address == null) {
      throw new ClusterConfigException("No task with index " + task.index() + " in job '" + task.job() + "'");
    }
    return address;
  }

  /** Every task, jobs by name and tasks by index. */
  public List<TaskId> allTasks() {
    List<TaskId> all = new ArrayList<>();
    jobs.forEach((job, tasks) -> tasks.keySet().forEach(i -> all.add(new TaskId(job, i))));
    return Collections.unmodifiableList(all);
  }

  /** TensorFlow's {@code as_dict()}: a list for a dense job, an index-to-address map otherwise. */
  public Map<String, Object> asDict() {
    Map<String, Object> dict = new LinkedHashMap<>();
    jobs.forEach((job, tasks) -> {
      boolean dense = tasks.lastKey() + 1 == tasks.size();
      dict.put(job, dense ? List.copyOf(tasks.values()) : Collections.unmodifiableMap(new LinkedHashMap<>(tasks)));
    });
    return Collections.unmodifiableMap(dict);
  }

  /** TensorFlow's {@code as_cluster_def()}: jobs sorted by name, tasks by index. */
  public ClusterDef toClusterDef() {
    ClusterDef.Builder def = ClusterDef.newBuilder();
    jobs.forEach((job, tasks) -> def.addJob(JobDef.newBuilder().setName(job).putAllTasks(tasks)));
    return def.build();
  }

  private SortedMap<Integer, String> tasksOf(String job) {
    SortedMap<Integer, String> tasks = jobs.get(job);
    if (tasks == null) {
      throw new ClusterConfigException("No such job in cluster: " + (job == null ? "None" : "'" + job + "'"));
    }
    return tasks;
  }

  @Override
  public boolean equals(Object o) {
    return o instanceof ClusterSpec other && jobs.equals(other.jobs);
  }

  @Override
  public int hashCode() {
    return jobs.hashCode();
  }

  @Override
  public String toString() {
    return Json.write(asDict());
  }
}
