package io.muster.launch;

import io.muster.cluster.HostPort;
import io.muster.cluster.TaskId;
import io.muster.cluster.TaskType;
import java.io.Serializable;
import java.util.ArrayList;
import java.util.Collections;
import java.util.EnumSet;
import java.util.List;
import java.util.Set;
import java.util.stream.Collectors;

/**
 * The tasks a launcher starts, by type, and which of them decide when the job has ended.
 *
 * <p>A launcher gets {@link #size()} members from its scheduler (Spark's barrier partitions, YARN's
 * containers) and numbers them 0..size-1; member {@code m} is {@link #task(int) task(m)}: the chief
 * first, then the workers, then the ps tasks, then the evaluator. The chief and the workers (the
 * <em>trainers</em>) are members 0..trainers-1, so a launcher that shards data gives shard {@code m}
 * to member {@code m}.
 *
 * <p>Tracked tasks end the job: it succeeds when every tracked task has exited 0 and fails as soon
 * as one fails; once every tracked task has exited, the untracked ones are ended. By default
 * {@code ps} and {@code evaluator} are untracked, and so is {@code worker} when the gang has a chief
 * and ps tasks: in TensorFlow 2's {@code ParameterServerStrategy} only the chief (the coordinator)
 * runs training code, and workers and ps tasks serve it until they are stopped. (Without a chief,
 * a gang with ps tasks is TensorFlow 1's between-graph training, whose workers do finish.)
 *
 * @param chiefs 0 or 1
 * @param workers 0 or more
 * @param ps 0 or more
 * @param evaluators 0 or 1
 * @param untracked the task types that do not end the job; at least one task must be tracked
 */
public record GangSpec(int chiefs, int workers, int ps, int evaluators, Set<TaskType> untracked)
    implements Serializable {

  public GangSpec {
    requireRange("chief", chiefs, 0, 1);
    requireRange("worker", workers, 0, Integer.MAX_VALUE);
    requireRange("ps", ps, 0, Integer.MAX_VALUE);
    requireRange("evaluator", evaluators, 0, 1);
    if (chiefs + workers == 0) {
      throw new IllegalArgumentException("a gang needs a chief or at least one worker, was " + describe(chiefs,
          workers, ps, evaluators));
    }
    untracked = untracked.isEmpty() ? Set.of() : Collections.unmodifiableSet(EnumSet.copyOf(untracked));
    boolean anyTracked = false;
    for (TaskType type : TaskType.values()) {
      anyTracked |= count(type, chiefs, workers, ps, evaluators) > 0 && !untracked.contains(type);
    }
    if (!anyTracked) {
      throw new IllegalArgumentException("every task of the gang (" + describe(chiefs, workers, ps, evaluators)
          + ") is untracked (" + names(untracked) + "), so nothing would end the job; track the chief or the workers");
    }
  }

  /** A gang with the default untracked types ({@link #defaultUntracked}). */
  public static GangSpec of(int chiefs, int workers, int ps, int evaluators) {
    return new GangSpec(chiefs, workers, ps, evaluators, defaultUntracked(chiefs, ps));
  }

  /** {@code n} workers and nothing else: the gang of synchronous data-parallel training. */
  public static GangSpec workers(int n) {
    return of(0, n, 0, 0);
  }

  /** {@code ps} and {@code evaluator}, and {@code worker} too when there are a chief and ps tasks. */
  public static Set<TaskType> defaultUntracked(int chiefs, int ps) {
    return chiefs > 0 && ps > 0 ? EnumSet.of(TaskType.WORKER, TaskType.PS, TaskType.EVALUATOR)
        : EnumSet.of(TaskType.PS, TaskType.EVALUATOR);
  }

  public GangSpec withUntracked(Set<TaskType> types) {
    return new GangSpec(chiefs, workers, ps, evaluators, types);
  }

  /** Every member: chief, workers, ps tasks and evaluator. */
  public int size() {
    return chiefs + workers + ps + evaluators;
  }

  /** The chief and the workers: the tasks that train on data (members 0..trainers-1). */
  public int trainers() {
    return chiefs + workers;
  }

  public int count(TaskType type) {
    return count(type, chiefs, workers, ps, evaluators);
  }

  /** The task types the gang has, in member order. */
  public List<TaskType> types() {
    return ORDER.stream().filter(type -> count(type) > 0).toList();
  }

  /** Member {@code m}'s task: chief 0, then worker 0.., then ps 0.., then evaluator 0. */
  public TaskId task(int member) {
    if (member < 0 || member >= size()) {
      throw new IllegalArgumentException("member " + member + " is outside the gang of " + size() + " ("
          + this + ")");
    }
    int rest = member;
    for (TaskType type : ORDER) {
      if (rest < count(type)) {
        return TaskId.of(type, rest);
      }
      rest -= count(type);
    }
    throw new AssertionError("unreachable: member " + member);
  }

  /** The inverse of {@link #task(int)}. */
  public int member(TaskId task) {
    int offset = 0;
    for (TaskType type : ORDER) {
      if (task.is(type)) {
        if (task.index() >= count(type)) {
          throw new IllegalArgumentException(task + " is not in the gang (" + this + ")");
        }
        return offset + task.index();
      }
      offset += count(type);
    }
    throw new IllegalArgumentException(task + " is not in the gang: its job is not chief, worker, ps or evaluator");
  }

  /** Every task of the gang, in member order. */
  public List<TaskId> tasks() {
    List<TaskId> all = new ArrayList<>(size());
    for (int m = 0; m < size(); m++) {
      all.add(task(m));
    }
    return all;
  }

  public boolean isTracked(TaskId task) {
    return TaskType.ofJobName(task.job()).map(type -> !untracked.contains(type)).orElse(true);
  }

  /** The task that writes the job's outputs and returns its result: the chief, else worker 0. */
  public TaskId chief() {
    return chiefs > 0 ? TaskId.of(TaskType.CHIEF, 0) : TaskId.of(TaskType.WORKER, 0);
  }

  /** The gang formed: every member's bound address, in member order. */
  public Gang formed(List<HostPort> addresses) {
    return new Gang(this, addresses);
  }

  /** {@code 1 chief, 2 workers, 1 ps (untracked: worker, ps)}: the untracked types this gang has, in member order. */
  @Override
  public String toString() {
    String untrackedHere = ORDER.stream().filter(t -> untracked.contains(t) && count(t) > 0).map(TaskType::jobName)
        .collect(Collectors.joining(", "));
    return describe(chiefs, workers, ps, evaluators) + (untrackedHere.isEmpty() ? "" : " (untracked: " + untrackedHere
        + ")");
  }

  private static final List<TaskType> ORDER = List.of(TaskType.CHIEF, TaskType.WORKER, TaskType.PS,
      TaskType.EVALUATOR);

  private static int count(TaskType type, int chiefs, int workers, int ps, int evaluators) {
    return switch (type) {
      case CHIEF -> chiefs;
      case WORKER -> workers;
      case PS -> ps;
      case EVALUATOR -> evaluators;
    };
  }

  private static String describe(int chiefs, int workers, int ps, int evaluators) {
    List<String> parts = new ArrayList<>();
    if (chiefs > 0) {
      parts.add(chiefs + " chief");
    }
    parts.add(workers + (workers == 1 ? " worker" : " workers"));
    if (ps > 0) {
      parts.add(ps + " ps");
    }
    if (evaluators > 0) {
      parts.add(evaluators + " evaluator");
    }
    return String.join(", ", parts);
  }

  private static String names(Set<TaskType> types) {
    return types.stream().map(TaskType::jobName).collect(Collectors.joining(", "));
  }

  private static void requireRange(String type, int n, int min, int max) {
    if (n < min || n > max) {
      throw new IllegalArgumentException(type + " count must be " + (max == Integer.MAX_VALUE ? ">= " + min
          : "in " + min + ".." + max) + ", was " + n);
    }
  }
}
