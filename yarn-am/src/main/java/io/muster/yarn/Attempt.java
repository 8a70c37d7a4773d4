package io.muster.yarn;

import io.muster.cluster.HostPort;
import io.muster.cluster.TaskId;
import io.muster.cluster.TaskType;
import io.muster.launch.EndOfJob;
import io.muster.launch.Gang;
import io.muster.launch.GangSpec;
import io.muster.launch.OnPreemption;
import io.muster.launch.Rerun;
import io.muster.launch.TaskProcess;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.stream.Collectors;
import org.apache.hadoop.yarn.api.records.ContainerExitStatus;

/**
 * One attempt of the whole gang, as the ApplicationMaster sees it: which container runs which task
 * (indices handed out in allocation order within each type), who has registered at which address,
 * how each command ended, and the launch core's verdict. Thread-safe: the master's loop and the
 * executors' calls meet here.
 */
final class Attempt {
  /** How long past the deadline a waiting executor is kept for the master's abort, which says why. */
  private static final Duration ABORT_GRACE = Duration.ofSeconds(5);

  /** What the master knows of one task. */
  static final class Member {
    final TaskId task;
    final String containerId;
    final String host;
    final String logs;
    HostPort address;
    Integer exitCode;
    List<String> stderrTail = List.of();
    boolean containerDone;
    boolean endedByMaster;
    final Instant allocated = Instant.now();
    Instant registered;
    Instant exited;
    /** When its executor last called the master (registered, heartbeat, exit). */
    Instant lastHeard;
    /** The executor's offer of its container to the next attempt; null while it has made none. */
    Offer offer;

    Member(TaskId task, String containerId, String host, String logs) {
      this.task = task;
      this.containerId = containerId;
      this.host = host;
      this.logs = logs;
    }

    String state() {
      return exitCode != null ? (endedByMaster ? "ended" : "exited " + exitCode) : containerDone ? "container ended"
          : registered != null ? "running" : "starting";
    }
  }

  /**
   * An executor's offer of its container to the next attempt, made once its attempt failed; the
   * executor waits for the answer (its call's deadline bounds the wait).
   */
  interface Offer {
    /** Whether the executor still waits for the answer. */
    boolean waiting();

    /** The container runs {@code task} in attempt {@code attempt}. */
    void accept(TaskId task, int attempt);

    /** The container is not wanted: the executor exits. */
    void decline(String reason);
  }

  final int number;
  final GangSpec gang;
  final Instant deadline;
  private final Map<TaskId, Member> members = new LinkedHashMap<>();
  private final Map<String, TaskId> byContainer = new LinkedHashMap<>();
  private final EndOfJob endOfJob;
  private String abortReason;
  /** Why the attempt is the cluster's failure, not the job's; null while it is not. */
  private String lostToCluster;
  /** When the verdict became a failure; null while it is not one. */
  private Instant failedAt;
  /** Whether the master ended the attempt for a command's own failure ({@link #abortForFailure}). */
  private boolean endedByOwnFailure;
  private Instant formedAt;
  /** The exit code by which a command says it saved for a preemption. */
  private final int savedExitCode;
  /** YARN's announcement that it will take a container of this attempt; null while there is none. */
  private String preemptionNotice;

  Attempt(int number, GangSpec gang, Duration gangTimeout, int savedExitCode) {
    this.number = number;
    this.gang = gang;
    this.deadline = Instant.now().plus(gangTimeout);
    this.endOfJob = new EndOfJob(gang);
    this.savedExitCode = savedExitCode;
  }

  /**
   * YARN named containers it will take (a preemption message). When one of them is this attempt's,
   * the attempt is over, as a gang cannot lose a member: a formed gang is told to save (the
   * executors send their commands the preemption signal) and ends when a command exits; a gang not
   * yet formed ends at once. Either way the attempt is the cluster's failure, which does not count.
   *
   * @return the notice, the first time a container of this attempt is named
   */
  synchronized Optional<String> preemptionAnnounced(java.util.Collection<String> containerIds) {
    if (preemptionNotice != null || abortReason != null) {
      return Optional.empty();
    }
    List<String> named = members.values().stream().filter(m -> !m.containerDone && containerIds.contains(m.containerId))
        .map(m -> m.task + " (container " + m.containerId + " on " + m.host + ")").toList();
    if (named.isEmpty()) {
      return Optional.empty();
    }
    preemptionNotice = "preemption notice for " + String.join(", ", named);
    if (!formed()) {
      abortLostToCluster(preemptionNotice + " before the gang formed; ending the attempt", "YARN preempted it");
    } else if (endOfJob.verdict() instanceof EndOfJob.Running) {
      lostToCluster = "YARN preempted it";
    }
    return Optional.of(preemptionNotice);
  }

  /** The preemption notice the executors pass on to their commands, while the attempt runs. */
  synchronized Optional<String> preemptionToDeliver() {
    return preemptionNotice != null && abortReason == null ? Optional.of(preemptionNotice) : Optional.empty();
  }

  /** Whether YARN announced it would take a container of this attempt while no command had failed. */
  synchronized boolean preempted() {
    return preemptionNotice != null && lostToCluster != null;
  }

  /**
   * Whether the preemption lost nothing: every tracked command exited saying it saved (or
   * succeeded), or the gang had not formed, so no command ran; false without a notice.
   */
  synchronized boolean savedForPreemption() {
    return preemptionNotice != null && (formedAt == null || members.values().stream().filter(this::tracked)
        .allMatch(this::saved));
  }

  private boolean saved(Member m) {
    return m.exitCode != null && (m.exitCode == savedExitCode || m.exitCode == 0);
  }

  private boolean tracked(Member m) {
    return gang.untracked().stream().noneMatch(m.task::is);
  }

  /**
   * Gives a newly allocated container the lowest index of its type no container has; empty when
   * the type is complete.
   *
   * @param logs where the container's logs are shown (its NodeManager's page)
   */
  synchronized Optional<TaskId> assign(TaskType type, String containerId, String host, String logs) {
    for (int index = 0; index < gang.count(type); index++) {
      TaskId task = TaskId.of(type, index);
      if (!members.containsKey(task)) {
        keep(task, containerId, host, logs);
        return Optional.of(task);
      }
    }
    return Optional.empty();
  }

  /** Gives {@code task} a container that ran it in the previous attempt, whose executor offered it. */
  synchronized void keep(TaskId task, String containerId, String host, String logs) {
    if (members.containsKey(task) || gang.tasks().stream().noneMatch(task::equals)) {
      throw new IllegalArgumentException(task + " is not a task without a container in attempt " + number);
    }
    members.put(task, new Member(task, containerId, host, logs));
    byContainer.put(containerId, task);
  }

  synchronized int allocated(TaskType type) {
    return (int) members.keySet().stream().filter(task -> task.is(type)).count();
  }

  /**
   * The executor of {@code task} offers its container to the next attempt: taken while the
   * container lives and this attempt has failed (aborted, or a command's failure is its verdict).
   */
  synchronized boolean offer(TaskId task, Offer offer) {
    Member m = member(task);
    if (m.containerDone || m.offer != null || !failed()) {
      return false;
    }
    m.offer = offer;
    m.lastHeard = Instant.now();
    notifyAll();
    return true;
  }

  /** Whether this attempt has failed: a container offered now is offered to the next attempt. */
  synchronized boolean failed() {
    return abortReason != null || endOfJob.verdict() instanceof EndOfJob.Failed;
  }

  /** The members whose executors offered their living containers to the next attempt. */
  synchronized List<Member> offered() {
    return members.values().stream().filter(m -> m.offer != null && !m.containerDone).toList();
  }

  /** Declines every offer not answered yet: no attempt follows. */
  synchronized void declineOffers(String reason) {
    members.values().stream().filter(m -> m.offer != null).forEach(m -> m.offer.decline(reason));
  }

  synchronized void register(TaskId task, HostPort address) {
    Member m = member(task);
    m.address = address;
    m.registered = Instant.now();
    m.lastHeard = m.registered;
    if (formedAt == null && formed()) {
      formedAt = m.registered;
    }
    notifyAll();
  }

  /** The task's executor called: it is alive. */
  synchronized void heard(TaskId task) {
    member(task).lastHeard = Instant.now();
  }

  /**
   * The members of a formed gang whose executors have been silent for {@code limit} or longer while
   * their commands run: no heartbeat (every second), no exit, and YARN has not said the container
   * ended. The clock starts at the latest of the executor's last call and the gang's forming (an
   * executor waiting for the gang does not heartbeat).
   */
  synchronized List<Silent> silentFor(Duration limit) {
    if (formedAt == null) {
      return List.of();
    }
    Instant now = Instant.now();
    List<Silent> silent = new ArrayList<>();
    for (Member m : members.values()) {
      Duration silence = Duration.between(m.lastHeard.isAfter(formedAt) ? m.lastHeard : formedAt, now);
      if (m.exitCode == null && !m.containerDone && m.offer == null && silence.compareTo(limit) >= 0) {
        silent.add(new Silent(m.task, m.containerId, m.host, silence));
      }
    }
    return silent;
  }

  /** A member whose executor has not called the master for {@code silence}. */
  record Silent(TaskId task, String containerId, String host, Duration silence) {}

  synchronized boolean formed() {
    return members.size() == gang.size() && members.values().stream().allMatch(m -> m.address != null);
  }

  /** Waits until every task has registered, the attempt is aborted, or the gang deadline passes. */
  synchronized Optional<List<HostPort>> awaitGang() throws InterruptedException {
    while (!formed() && abortReason == null) {
      // The master aborts the attempt at the deadline, with its account of why; this wait is the fallback.
      long left = Duration.between(Instant.now(), deadline.plus(ABORT_GRACE)).toMillis();
      if (left <= 0) {
        return Optional.empty();
      }
      wait(left);
    }
    if (abortReason != null) {
      return Optional.empty();
    }
    return Optional.of(gang.tasks().stream().map(t -> members.get(t).address).toList());
  }

  /** A command's exit, as its executor reported it or as YARN reported its container's. */
  synchronized EndOfJob.Verdict exited(TaskId task, int code, List<String> stderrTail) {
    return exited(task, code, stderrTail, false);
  }

  /** @param endedByMaster the executor ended the command because the master said so (END or ABORT) */
  synchronized EndOfJob.Verdict exited(TaskId task, int code, List<String> stderrTail, boolean endedByMaster) {
    Member m = member(task);
    m.lastHeard = Instant.now();
    if (m.exitCode != null) {
      return endOfJob.verdict();
    }
    m.exitCode = code;
    m.endedByMaster = endedByMaster;
    m.stderrTail = List.copyOf(stderrTail);
    m.exited = Instant.now();
    EndOfJob.Verdict verdict = endOfJob.exited(task, code);
    if (failedAt == null && verdict instanceof EndOfJob.Failed) {
      failedAt = m.exited;
    }
    return verdict;
  }

  /** YARN says the container is gone; a command that never reported its exit failed with the container's status. */
  synchronized Optional<TaskId> containerCompleted(String containerId, int exitStatus, String diagnostics) {
    TaskId task = byContainer.get(containerId);
    if (task == null) {
      return Optional.empty();
    }
    Member m = members.get(task);
    m.containerDone = true;
    if (m.exitCode == null) {
      EndOfJob.Verdict verdict = exited(task, exitStatus == 0 ? 1 : exitStatus, diagnostics.isBlank() ? List.of()
          : List.of("the container ended (YARN exit status " + exitStatus + "): " + diagnostics.strip()));
      if (abortReason == null && verdict instanceof EndOfJob.Failed failed && failed.task().equals(task)
          && (exitStatus == ContainerExitStatus.PREEMPTED || exitStatus == ContainerExitStatus.ABORTED)) {
        lostToCluster = "YARN took the container away"; // preempted, or its node was lost: not the job's failure
      }
    }
    return Optional.of(task);
  }

  /** Why the attempt is the cluster's failure (YARN preempted a container or lost its node, a node went silent), if it is. */
  synchronized Optional<String> lostToCluster() {
    return Optional.ofNullable(lostToCluster);
  }

  synchronized EndOfJob.Verdict verdict() {
    return endOfJob.verdict();
  }

  /**
   * The failure the master is to act on now: a cluster's failure at once, a command's own once
   * {@link Rerun#CAUSE_WINDOW} has passed without a cluster's failure taken for its cause. After a
   * preemption notice, a command that saved is followed by the others' own exits (TensorFlow's
   * chief leaves last, after its peers, and would not outlive the SIGTERM of an abort), for up to
   * {@link OnPreemption#SAVED_PEERS_WAIT}; any other exit is acted on at once.
   */
  synchronized Optional<EndOfJob.Failed> failureToActOn() {
    if (!(endOfJob.verdict() instanceof EndOfJob.Failed failed)) {
      return Optional.empty();
    }
    Instant now = Instant.now();
    if (preempted() ? failed.exitCode() == savedExitCode && members.values().stream().filter(this::tracked)
            .anyMatch(m -> m.exitCode == null) && now.isBefore(failedAt.plus(OnPreemption.SAVED_PEERS_WAIT))
        : failed.isCommandsOwn() && now.isBefore(failedAt.plus(Rerun.CAUSE_WINDOW))) {
      return Optional.empty();
    }
    return Optional.of(failed);
  }

  /** Ends the attempt for its failed task, whose verdict no later exit changes. */
  synchronized void abortForFailure() {
    if (abortReason == null && endOfJob.settle() instanceof EndOfJob.Failed failed) {
      endedByOwnFailure = failed.isCommandsOwn() && !preempted();
      abort(!preempted() ? failureReport() : preemptionNotice + "; " + failed.task() + " exited with code "
          + failed.exitCode() + (failed.exitCode() == savedExitCode ? " (saved)" : "") + "; the attempt ends");
    }
  }

  /** Whether the attempt ended for a command's own failure, which a re-run would repeat. */
  synchronized boolean endedByOwnFailure() {
    return endedByOwnFailure;
  }

  synchronized void abort(String reason) {
    if (abortReason == null) {
      abortReason = reason;
    }
    notifyAll();
  }

  /** Aborts the attempt for a failure of the cluster ({@code why}), which does not count against the job's attempts. */
  synchronized void abortLostToCluster(String reason, String why) {
    if (abortReason == null) {
      lostToCluster = why;
    }
    abort(reason);
  }

  synchronized Optional<String> abortReason() {
    return Optional.ofNullable(abortReason);
  }

  /** Whether the task should end its command now: an untracked task after success. */
  synchronized boolean shouldEnd(TaskId task) {
    return endOfJob.verdict() instanceof EndOfJob.Succeeded done && done.toEnd().contains(task);
  }

  synchronized boolean allContainersDone() {
    return members.values().stream().allMatch(m -> m.containerDone);
  }

  /** Whether every container has ended or been offered to the next attempt: the attempt is over. */
  synchronized boolean allContainersDoneOrOffered() {
    return members.values().stream().allMatch(m -> m.containerDone || m.offer != null);
  }

  /** The containers that live. */
  synchronized List<String> runningContainers() {
    return members.values().stream().filter(m -> !m.containerDone).map(m -> m.containerId).toList();
  }

  /** The containers that live and were not offered to the next attempt: the ones an ended attempt stops. */
  synchronized List<String> containersToEnd() {
    return members.values().stream().filter(m -> !m.containerDone && m.offer == null).map(m -> m.containerId)
        .toList();
  }

  synchronized boolean isCurrent(TaskId task, String containerId) {
    Member m = members.get(task);
    return m != null && m.containerId.equals(containerId);
  }

  /** The containers of members that were given one but never registered: their nodes are worth a probe. */
  synchronized List<String> unregisteredContainers() {
    return members.values().stream().filter(m -> m.address == null && !m.containerDone).map(m -> m.containerId)
        .toList();
  }

  /**
   * Why the gang did not form: per type, allocated and registered against wanted, on which nodes;
   * {@code nodeAnswers} says what the node of a container that never registered answered a probe.
   */
  synchronized String formationReport(Map<String, ?> nodeAnswers) {
    List<String> parts = new ArrayList<>();
    List<String> missing = new ArrayList<>();
    for (TaskType type : gang.types()) {
      long registered = members.values().stream().filter(m -> m.task.is(type) && m.address != null).count();
      parts.add(type.jobName() + " " + allocated(type) + "/" + gang.count(type) + " allocated, " + registered + "/"
          + gang.count(type) + " registered");
      for (int i = 0; i < gang.count(type); i++) {
        TaskId t = TaskId.of(type, i);
        Member m = members.get(t);
        if (m == null) {
          missing.add(t + " (no container)");
        } else if (m.address == null) {
          Object probe = nodeAnswers.get(m.containerId);
          missing.add(t + " (container " + m.containerId + " on " + m.host + " never registered"
              + (probe == null ? "" : "; " + probe) + ")");
        }
      }
    }
    String nodes = members.values().stream().map(m -> m.host).distinct().sorted().collect(Collectors.joining(", "));
    return String.join("; ", parts) + (nodes.isEmpty() ? "" : "; nodes: " + nodes) + "; missing: "
        + String.join(", ", missing);
  }

  /** The failed task's account: task, host, container, exit code and the tail of its stderr. */
  synchronized String failureReport() {
    if (preempted() && formedAt != null) {
      return preemptionReport();
    }
    if (abortReason != null) { // what ended the attempt first; a failure's own report when that was it
      return abortReason;
    }
    if (!(endOfJob.verdict() instanceof EndOfJob.Failed failed)) {
      return "";
    }
    Member m = members.get(failed.task());
    return failed.task() + " on " + m.host + " (container " + m.containerId + ") "
        + TaskProcess.exitStory(failed.exitCode(), m.stderrTail);
  }

  /** The notice, and how each command answered it: saved (the saved exit code), finished, or not saved and why. */
  private String preemptionReport() {
    List<String> saved = new ArrayList<>();
    List<String> notSaved = new ArrayList<>();
    for (Member m : members.values()) {
      if (saved(m)) {
        saved.add(m.task.toString());
      } else if (tracked(m)) {
        notSaved.add(m.task + (m.exitCode == null ? " (still running)" : " (" + TaskProcess.exitStory(m.exitCode,
            m.stderrTail).replace("\n  ", " | ") + ")"));
      }
    }
    return preemptionNotice + "; " + (notSaved.isEmpty() ? "every task saved (exit code " + savedExitCode + ")"
        : (saved.isEmpty() ? "" : "saved by " + String.join(", ", saved) + "; ") + "not saved by "
            + String.join(", ", notSaved) + ": the next attempt resumes from the last backup");
  }

  /** Every task for the status page, in member order; the TF_CONFIG each got once the gang formed. */
  synchronized List<Map<String, Object>> describeTasks() {
    Optional<Gang> formed = formed()
        ? Optional.of(gang.formed(gang.tasks().stream().map(t -> members.get(t).address).toList()))
        : Optional.empty();
    List<Map<String, Object>> tasks = new ArrayList<>();
    for (TaskId task : gang.tasks()) {
      Member m = members.get(task);
      Map<String, Object> row = new LinkedHashMap<>();
      row.put("task", task.toString());
      row.put("type", task.job());
      row.put("index", task.index());
      row.put("host", m == null ? null : m.host);
      row.put("container", m == null ? null : m.containerId);
      row.put("logs", m == null ? null : m.logs);
      row.put("state", m == null ? "waiting for a container" : m.state());
      row.put("exit_code", m == null ? null : m.exitCode);
      row.put("allocated", m == null ? null : m.allocated.toString());
      row.put("registered", m == null || m.registered == null ? null : m.registered.toString());
      row.put("exited", m == null || m.exited == null ? null : m.exited.toString());
      row.put("tf_config", formed.map(g -> g.tfConfig(gang.member(task)).toJson()).orElse(null));
      tasks.add(row);
    }
    return tasks;
  }

  private Member member(TaskId task) {
    Member m = members.get(task);
    if (m == null) {
      throw new IllegalArgumentException(task + " has no container in attempt " + number);
    }
    return m;
  }
}
