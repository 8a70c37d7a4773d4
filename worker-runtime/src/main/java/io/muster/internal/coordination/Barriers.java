package io.muster.internal.coordination;

import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import io.muster.cluster.TaskId;
import java.time.Duration;
import java.util.Comparator;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.SortedSet;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.function.Function;
import java.util.stream.Collectors;

/**
 * The coordination service's barriers, by id, with TensorFlow's rules: the deadline runs from the
 * first arrival; a counter tells the uses of one id apart, and callers of a decided use get its
 * result again; a participant in error fails the barrier at once. Every method runs under the
 * service's lock, which the timeout callbacks take too.
 */
final class Barriers {

  private final Map<String, Barrier> byId = new HashMap<>();
  private final ScheduledExecutorService timer;
  private final Object lock;
  private final Function<TaskId, String> describe;
  private final Function<TaskId, Optional<String>> errorOf;

  /**
   * @param describe a task's name and address for messages
   * @param errorOf the error of a task in ERROR, empty otherwise
   */
  Barriers(ScheduledExecutorService timer, Object lock, Function<TaskId, String> describe,
      Function<TaskId, Optional<String>> errorOf) {
    this.timer = timer;
    this.lock = lock;
    this.describe = describe;
    this.errorOf = errorOf;
  }

  /** {@code source} arrives at use {@code counter} of barrier {@code id}; {@code outcome} hears the result. */
  void arrive(String id, long counter, Duration timeout, SortedSet<TaskId> participants, TaskId source,
      Barrier.Outcome outcome) {
    Barrier barrier = byId.get(id);
    if (barrier == null || (barrier.done() && counter > barrier.counter)) {
      barrier = start(id, counter, timeout, participants);
    } else if (barrier.counter != counter) {
      outcome.accept(Errors.barrierError(Status.Code.INTERNAL, "Barrier " + id + " counter mismatch: the service is "
          + "at use " + barrier.counter + ", task " + describe.apply(source) + " sent " + counter, id, counter));
      return;
    } else if (!barrier.participants.equals(participants)) {
      outcome.accept(Errors.barrierError(Status.Code.INVALID_ARGUMENT, "Barrier " + id + " was started with tasks "
          + barrier.participants + ", but task " + describe.apply(source) + " asked for " + participants, id, counter));
      return;
    }
    if (barrier.done()) {
      barrier.replay(outcome);
    } else {
      barrier.arrive(source, outcome);
    }
  }

  private Barrier start(String id, long counter, Duration timeout, SortedSet<TaskId> participants) {
    Barrier barrier = new Barrier(id, counter, participants);
    byId.put(id, barrier);
    for (TaskId t : participants) {
      Optional<String> error = errorOf.apply(t);
      if (error.isPresent()) {
        barrier.finish(Errors.barrierError(Status.Code.INTERNAL, "Barrier " + id + " failed because task "
            + describe.apply(t) + " is in error: " + error.get(), id, counter));
        return barrier;
      }
    }
    barrier.setTimeout(timer.schedule(() -> {
      synchronized (lock) {
        if (barrier.done()) {
          return;
        }
        String missing = barrier.missing().stream().map(describe).collect(Collectors.joining(", "));
        barrier.finish(Errors.barrierError(Status.Code.DEADLINE_EXCEEDED, "Barrier timed out. Id: " + id
            + ". # of tasks that reached the barrier: " + barrier.arrived.size() + "/" + participants.size()
            + " after " + timeout.toMillis() + " ms. Tasks that did not reach it: " + missing + ". The first task at "
            + "the barrier: " + barrier.arrived.stream().findFirst().map(TaskId::fullName).orElse("none"), id, counter));
      }
    }, timeout.toMillis(), TimeUnit.MILLISECONDS));
    return barrier;
  }

  /**
   * Fails use {@code counter} of barrier {@code id} for everyone waiting at it, or, when it has not
   * started, fails it in advance.
   *
   * @throws StatusRuntimeException FAILED_PRECONDITION when that use has already been decided
   */
  void cancel(String id, long counter, TaskId source, SortedSet<TaskId> everyone) {
    Barrier barrier = byId.get(id);
    if (barrier != null && barrier.done() && barrier.counter >= counter) {
      throw Errors.barrierError(Status.Code.FAILED_PRECONDITION, "Barrier " + id + " (use " + barrier.counter
          + ") has already completed; it cannot be cancelled", id, counter);
    }
    if (barrier == null || barrier.done()) {
      barrier = new Barrier(id, counter, everyone);
      byId.put(id, barrier);
    }
    barrier.finish(Errors.barrierError(Status.Code.CANCELLED, "Barrier " + id + " was cancelled by task "
        + describe.apply(source), id, counter));
  }

  /** {@code barrier c: worker 0, worker 2} for each undecided barrier someone waits at, by id. */
  List<String> describeWaiting() {
    return byId.values().stream().filter(b -> !b.done() && !b.arrived.isEmpty())
        .sorted(Comparator.comparing(b -> b.id))
        .map(b -> "barrier " + b.id + ": " + b.arrived.stream().sorted().map(TaskId::toString)
            .collect(Collectors.joining(", ")))
        .toList();
  }

  /** A participant is in error: every undecided barrier it takes part in fails. */
  void failBarriersOf(TaskId task, String error) {
    for (Barrier barrier : byId.values()) {
      if (!barrier.done() && barrier.participants.contains(task)) {
        barrier.finish(Errors.barrierError(Status.Code.INTERNAL, "Barrier " + barrier.id + " failed because task "
            + describe.apply(task) + " is in error: " + error, barrier.id, barrier.counter));
      }
    }
  }

  void failAll(StatusRuntimeException error) {
    byId.values().forEach(b -> b.finish(error));
  }
}
