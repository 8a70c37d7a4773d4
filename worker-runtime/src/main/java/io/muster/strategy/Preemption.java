package io.muster.strategy;

import io.grpc.Context;
import io.grpc.Status;
import io.muster.cluster.TaskId;
import io.muster.coordination.CoordinationException;
import io.muster.coordination.KeyValues;
import io.muster.internal.Durations;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.List;
import java.util.Optional;
import java.util.OptionalLong;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * A notice that the cluster will take the gang's containers (a scheduler's SIGTERM, YARN's
 * preemption message), and the step every replica agrees to save at before it leaves: the Java
 * counterpart of {@code tf.distribute.experimental.PreemptionCheckpointHandler}.
 *
 * <p>A notice may reach any one task ({@link #notice}, from a signal handler or a launcher). At its
 * next {@link #saveAfter} that task publishes, through the coordination service's key-value store,
 * the step after the one it has done; every task watches that key. The publisher waits until every
 * other replica has seen it before it takes its next step. Since no replica can finish a step
 * without every other one's all-reduce, none can pass the agreed step unaware of it, and all save
 * at the same one. Where several tasks receive the notice at once, the first to publish wins and
 * the others take its step.
 *
 * <p>A training loop calls {@link #saveAfter} after every step (checkpoint-hdfs's
 * {@code BackupAndRestore} does, given this); when it returns true, the loop saves and leaves.
 */
public final class Preemption {

  private static final Logger log = LoggerFactory.getLogger(Preemption.class);
  private static final String STEP_KEY = "muster/preemption/step";
  private static final String ACK_DIR = "muster/preemption/ack/";

  private final TaskId task;
  private volatile String noticeReason;
  private volatile long noticeNanos;
  private volatile OptionalLong agreedStep = OptionalLong.empty();
  private KeyValues keyValues;
  private List<TaskId> peers;
  private Duration ackTimeout;
  private Context.CancellableContext watch;
  private Context.CancellableContext forming; // guarded by this
  private sun.misc.Signal signal;
  private sun.misc.SignalHandler previousHandler;

  Preemption(TaskId task) {
    this.task = task;
  }

  /**
   * The cluster will take this task's container: the gang saves at the next step every replica can
   * agree on. Safe from any thread, a signal handler's included; a second notice changes nothing.
   */
  public void notice(String reason) {
    boolean beforeFormed;
    synchronized (this) {
      if (noticeReason != null) {
        log.info("{}: preemption notice ({}) while one is already being acted on ({})", task, reason, noticeReason);
        return;
      }
      noticeNanos = System.nanoTime();
      noticeReason = reason;
      beforeFormed = forming != null;
      if (beforeFormed) {
        forming.cancel(null);
      }
    }
    log.info("{}: preemption notice ({}); {}", task, reason, beforeFormed
        ? "the gang has not formed yet, so this task leaves now" : "the gang saves after its next step");
  }

  /** Until {@link #formed()}, a notice cancels {@code context}, in which the task joins its gang. */
  synchronized void whileForming(Context.CancellableContext context) {
    forming = context;
  }

  /**
   * The gang has formed: from now on a notice is acted on at a step.
   *
   * @throws PreemptedException when a notice came while it formed
   */
  synchronized void formed() {
    forming = null;
    if (noticeReason != null) {
      throw beforeFormed();
    }
  }

  /** What the strategy's construction throws for {@code failure}: a notice that came while it formed ended it. */
  RuntimeException whileFormingOr(RuntimeException failure) {
    return noticeReason != null && !(failure instanceof PreemptedException) ? beforeFormed() : failure;
  }

  private PreemptedException beforeFormed() {
    return new PreemptedException(noticeReason + " came before the gang formed; no step was taken, so there is "
        + "nothing new to save: the next run starts where the last backup left off");
  }

  /** Whether a notice reached this task or another replica has published a step to save at. */
  public boolean requested() {
    return noticeReason != null || agreedStep.isPresent();
  }

  /** The notice this task received itself, if any. */
  public Optional<String> reason() {
    return Optional.ofNullable(noticeReason);
  }

  /** Nanoseconds ({@link System#nanoTime}) since this task's own notice; empty where the notice came from a peer. */
  public OptionalLong nanosSinceNotice() {
    return noticeReason == null ? OptionalLong.empty() : OptionalLong.of(System.nanoTime() - noticeNanos);
  }

  /**
   * Call after each step, every replica with the same count: true when {@code stepsDone} (steps this
   * run has completed, counted from 1) is the step the gang agreed to save at, so the caller must save
   * now and then leave. Where this task holds a notice no step has been agreed for, it publishes one
   * and waits (up to the coordination join timeout) until every other replica has seen it.
   *
   * @throws IllegalStateException when {@code stepsDone} is past the agreed step: a step was not reported
   * @throws CoordinationException when a replica did not acknowledge the published step in time
   */
  public boolean saveAfter(long stepsDone) {
    if (agreedStep.isEmpty() && noticeReason != null) {
      publish(stepsDone + 1);
    }
    if (agreedStep.isEmpty()) {
      return false;
    }
    long step = agreedStep.getAsLong();
    if (stepsDone > step) {
      throw new IllegalStateException(task + " is at step " + stepsDone + ", past step " + step + ", which the gang "
          + "agreed to save at for preemption: saveAfter must be called after every step");
    }
    return stepsDone == step;
  }

  /** Starts watching for a peer's published step; called once the task has joined the coordination service. */
  void start(KeyValues store, List<TaskId> replicas, Duration timeout) {
    this.keyValues = store;
    this.peers = replicas.stream().filter(t -> !t.equals(task)).toList();
    this.ackTimeout = timeout;
    this.watch = Context.current().withCancellation();
    Thread watcher = new Thread(() -> watch.run(this::watchForAgreedStep), "muster-preemption-watch-" + task);
    watcher.setDaemon(true);
    watcher.start();
  }

  private void watchForAgreedStep() {
    try {
      // as long as the strategy lives: close() cancels this wait, which a notice may end at any time
      Published published = Published.parse(keyValues.get(STEP_KEY, Duration.ofDays(365)));
      agree(published);
      keyValues.insert(ackKey(task), new byte[0], true);
    } catch (RuntimeException e) {
      if (!watch.isCancelled()) {
        log.warn("{}: stopped watching for a preemption notice from another task: {}", task, e.getMessage());
      }
    }
  }

  private void publish(long step) {
    Published mine = new Published(step, task, noticeReason);
    Published agreed;
    try {
      keyValues.insert(STEP_KEY, mine.bytes(), false);
      agreed = mine;
    } catch (CoordinationException e) {
      if (e.code() != Status.Code.ALREADY_EXISTS) {
        throw e;
      }
      agreed = Published.parse(keyValues.get(STEP_KEY, ackTimeout)); // another task's notice came first
    }
    agree(agreed);
    if (agreed == mine) {
      long start = System.nanoTime();
      for (TaskId peer : peers) {
        try {
          keyValues.get(ackKey(peer), ackTimeout);
        } catch (RuntimeException e) {
          throw new CoordinationException(Status.Code.DEADLINE_EXCEEDED, task + ": " + peer + " did not acknowledge "
              + "the preemption notice (save after step " + step + ") within " + Durations.words(ackTimeout), peer, e);
        }
      }
      log.info("{}: every replica will save after step {} ({} acknowledged in {} ms)", task, step,
          peers.size() == 1 ? "1 other" : peers.size() + " others", (System.nanoTime() - start) / 1_000_000);
    }
  }

  private synchronized void agree(Published published) {
    if (agreedStep.isEmpty()) {
      agreedStep = OptionalLong.of(published.step());
      log.info("{}: saving after step {} for preemption ({} received {})", task, published.step(), published.from(),
          published.reason());
    }
  }

  private static String ackKey(TaskId task) {
    return ACK_DIR + task.job() + "_" + task.index();
  }

  /**
   * Makes the signal {@code name} ({@code TERM}) a notice instead of the JVM's exit, until {@link #close}:
   * what TensorFlow's handler does, for a task whose scheduler signals before it kills.
   *
   * @throws IllegalArgumentException when the JVM does not know the signal or reserves it
   */
  void noticeOnSignal(String name) {
    sun.misc.Signal signal = new sun.misc.Signal(name);
    previousHandler = sun.misc.Signal.handle(signal, s -> notice("SIG" + s.getName()));
    this.signal = signal;
  }

  /** Stops watching and gives the signal back to its previous handler; the strategy calls it before it leaves. */
  void close() {
    if (watch != null) {
      watch.cancel(null);
    }
    if (signal != null) {
      sun.misc.Signal.handle(signal, previousHandler);
    }
  }

  /** What a task with a notice publishes: the step to save after, itself, and the notice's reason. */
  record Published(long step, TaskId from, String reason) {
    byte[] bytes() {
      return (step + " " + from + " " + reason).getBytes(StandardCharsets.UTF_8);
    }

    static Published parse(byte[] value) {
      String[] parts = new String(value, StandardCharsets.UTF_8).split(" ", 4);
      return new Published(Long.parseLong(parts[0]), new TaskId(parts[1], Integer.parseInt(parts[2])), parts[3]);
    }
  }
}
