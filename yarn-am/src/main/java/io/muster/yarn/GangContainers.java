package io.muster.yarn;

import io.muster.cluster.TaskId;
import io.muster.launch.Attempt;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.function.Predicate;
import java.util.HashSet;
import org.apache.hadoop.yarn.api.records.Container;
import org.apache.hadoop.yarn.api.records.PreemptionMessage;

/**
 * The containers of one attempt, as the ApplicationMaster keeps them beside the attempt's life
 * ({@link Attempt}): which container runs which task, which YARN has reported ended, which the
 * master asked to stop, and which an executor offers to the next attempt. Thread-safe: the master's
 * loop and the executors' calls meet here.
 */
final class GangContainers {

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

  /** One container of the attempt. */
  record Held(TaskId task, Container container) {
    String id() {
      return container.getId().toString();
    }

    String host() {
      return container.getNodeId().getHost();
    }

    /** Where its task runs, for the attempt's reports. */
    Attempt.Placement placement() {
      return placement(container);
    }

    static Attempt.Placement placement(Container container) {
      return new Attempt.Placement(container.getNodeId().getHost(), "container " + container.getId(),
          Optional.of("http://" + container.getNodeHttpAddress() + "/node/containerlogs/" + container.getId() + "/"
              + System.getenv("USER")));
    }
  }

  private final Attempt attempt;
  private final Map<String, Held> held = new LinkedHashMap<>();
  private final Set<String> done = new HashSet<>();
  private final Map<TaskId, Offer> offers = new LinkedHashMap<>();

  GangContainers(Attempt attempt) {
    this.attempt = attempt;
  }

  Attempt attempt() {
    return attempt;
  }

  synchronized void add(TaskId task, Container container) {
    held.put(container.getId().toString(), new Held(task, container));
  }

  synchronized Optional<Held> get(String containerId) {
    return Optional.ofNullable(held.get(containerId));
  }

  /** YARN says the container ended: its task, if it is this attempt's. */
  synchronized Optional<TaskId> completed(String containerId) {
    Held h = held.get(containerId);
    if (h == null) {
      return Optional.empty();
    }
    done.add(containerId);
    return Optional.of(h.task());
  }

  /** The container is no longer the master's (released): it counts as ended. */
  synchronized void released(String containerId) {
    done.add(containerId);
  }

  /**
   * The executor of {@code task} offers its container to the next attempt: taken while the
   * container lives and this attempt has failed.
   */
  synchronized boolean offer(TaskId task, Offer offer) {
    Optional<Held> h = held.values().stream().filter(c -> c.task().equals(task)).findFirst();
    if (h.isEmpty() || done.contains(h.get().id()) || offers.containsKey(task) || !attempt.failed()) {
      return false;
    }
    offers.put(task, offer);
    return true;
  }

  /** The containers whose executors offered them to the next attempt and still wait, with their offers. */
  synchronized Map<Held, Offer> offered() {
    Map<Held, Offer> live = new LinkedHashMap<>();
    held.values().stream().filter(h -> offers.containsKey(h.task()) && !done.contains(h.id()))
        .forEach(h -> live.put(h, offers.get(h.task())));
    return live;
  }

  /** Declines every offer: no attempt follows. */
  synchronized void declineOffers(String reason) {
    offers.values().forEach(o -> o.decline(reason));
  }

  /** Whether every container has ended or been offered to the next attempt: the attempt is over. */
  synchronized boolean allDoneOrOffered() {
    return held.values().stream().allMatch(h -> done.contains(h.id()) || offers.containsKey(h.task()));
  }

  /** The containers that live. */
  synchronized List<Held> running() {
    return held.values().stream().filter(h -> !done.contains(h.id())).toList();
  }

  /** The containers that live and were not offered to the next attempt: the ones an ended attempt stops. */
  synchronized List<Held> toEnd() {
    return held.values().stream().filter(h -> !done.contains(h.id()) && !offers.containsKey(h.task())).toList();
  }

  /** The living containers of tasks that match. */
  synchronized List<Held> running(Predicate<TaskId> tasks) {
    return new ArrayList<>(running().stream().filter(h -> tasks.test(h.task())).toList());
  }

  /**
   * The containers a preemption message names: the strict contract's (YARN takes them) and the
   * negotiable one's (the capacity scheduler's way: it takes them unless the master gives back as
   * much). For a gang any container is the whole attempt, so both count alike.
   */
  static Set<String> named(PreemptionMessage message) {
    Set<String> named = new HashSet<>();
    if (message.getStrictContract() != null) {
      message.getStrictContract().getContainers().forEach(c -> named.add(c.getId().toString()));
    }
    if (message.getContract() != null) {
      message.getContract().getContainers().forEach(c -> named.add(c.getId().toString()));
    }
    return named;
  }
}
