package io.muster.internal.coordination;

import io.grpc.StatusRuntimeException;
import io.muster.cluster.TaskId;
import java.util.ArrayList;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Set;
import java.util.SortedSet;
import java.util.concurrent.ScheduledFuture;
import java.util.function.Consumer;

/**
 * One use of a barrier id (one counter value): who must arrive, who has, and, once decided, the
 * result every caller with the same id and counter gets. Guarded by the service's lock.
 */
final class Barrier {

  /** Told the result: {@code null} when the barrier passed, the error otherwise. */
  interface Outcome extends Consumer<StatusRuntimeException> {}

  final String id;
  final long counter;
  final SortedSet<TaskId> participants;
  final Set<TaskId> arrived = new LinkedHashSet<>();
  private final List<Outcome> waiting = new ArrayList<>();
  private ScheduledFuture<?> timeout;
  private boolean done;
  private StatusRuntimeException error;

  Barrier(String id, long counter, SortedSet<TaskId> participants) {
    this.id = id;
    this.counter = counter;
    this.participants = participants;
  }

  void setTimeout(ScheduledFuture<?> timeout) {
    this.timeout = timeout;
  }

  boolean done() {
    return done;
  }

  /** Records an arrival; passes the barrier when the last participant arrives. */
  void arrive(TaskId task, Outcome outcome) {
    if (done) {
      outcome.accept(error);
      return;
    }
    arrived.add(task);
    waiting.add(outcome);
    if (arrived.containsAll(participants)) {
      finish(null);
    }
  }

  /** Decides the barrier (null: passed) and tells everyone waiting; later calls change nothing. */
  void finish(StatusRuntimeException result) {
    if (done) {
      return;
    }
    done = true;
    error = result;
    if (timeout != null) {
      timeout.cancel(false);
    }
    waiting.forEach(w -> w.accept(result));
    waiting.clear();
  }

  /** Replays the decided result to a late caller with the same counter. */
  void replay(Outcome outcome) {
    outcome.accept(error);
  }

  List<TaskId> missing() {
    return participants.stream().filter(t -> !arrived.contains(t)).toList();
  }
}
