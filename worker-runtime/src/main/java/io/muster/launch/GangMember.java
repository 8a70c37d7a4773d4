package io.muster.launch;

import io.grpc.Channel;
import io.grpc.Status;
import io.grpc.stub.ClientCallStreamObserver;
import io.grpc.stub.ClientResponseObserver;
import io.muster.cluster.HostPort;
import io.muster.cluster.TaskId;
import io.muster.proto.gang.Beat;
import io.muster.proto.gang.GangServiceGrpc;
import io.muster.proto.gang.Join;
import io.muster.proto.gang.LauncherSays;
import io.muster.proto.gang.Line;
import io.muster.proto.gang.Lines;
import io.muster.proto.gang.MemberSays;
import io.muster.proto.gang.Notice;
import io.muster.proto.gang.TaskRef;
import java.time.Clock;
import java.time.Duration;
import java.time.Instant;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * A member's end of {@code muster.GangService} ({@link GangEndpoint}), the same in a Spark barrier
 * task and a YARN task executor: one stream from joining to the exit. The member beats every
 * {@link Heartbeats#EVERY}; it takes a launcher that has said nothing for
 * {@link Heartbeats#LAUNCHER_SILENT}, or whose stream breaks, for lost, and is told
 * {@link Listener#abort} as for a failed attempt, so that no command outlives its launcher. What the
 * launcher tells it reaches its {@link Listener} on a thread of its own, in order, so a listener may
 * take its time (end a command). Lines wait while the launcher reads more slowly than they come.
 */
public final class GangMember implements AutoCloseable {

  private static final Logger log = LoggerFactory.getLogger(GangMember.class);

  /** What the launcher tells the member; each runs on the member's listener thread. */
  public interface Listener {
    /** A member of the attempt is going away: save and leave ({@code notice} says who and why). */
    default void preempt(String notice) {}

    /** Every tracked task has finished: end the command (an untracked task), and succeed. */
    default void end() {}

    /** The attempt has ended (failed, not formed, or the launcher was lost): end what runs. */
    default void abort(String reason) {}
  }

  /** The gang will not form, or the attempt ended before it did; the launcher's words. */
  public static final class GangEndedException extends IllegalStateException {
    GangEndedException(String message) {
      super(message);
    }
  }

  private final TaskId task;
  private final String launcherName;
  private final Listener listener;
  private final Clock clock;
  private final ExecutorService listening;
  private final ScheduledExecutorService beats;
  private final CompletableFuture<List<HostPort>> formed = new CompletableFuture<>();
  private final CompletableFuture<Boolean> exitAck = new CompletableFuture<>();
  /** Why the attempt ended for this member, once the launcher said so or was lost. */
  private final CompletableFuture<String> aborted = new CompletableFuture<>();
  private ClientCallStreamObserver<MemberSays> out; // guarded by this
  private volatile Instant lastFromLauncher;
  /** When the beat thread last ran, in this JVM's own time: a pause of the JVM is real time, whatever the clock. */
  private long lastBeatNanos = System.nanoTime();
  private boolean closed; // guarded by this
  private boolean joined; // guarded by this
  /** Whether the launcher acknowledged the exit: the stream then ends as the member's last word. */
  private volatile boolean acknowledged;

  private GangMember(TaskId task, String launcherName, Listener listener, Clock clock) {
    this.task = task;
    this.launcherName = launcherName;
    this.listener = listener;
    this.clock = clock;
    String suffix = task.job() + "-" + task.index();
    this.listening = Executors.newSingleThreadExecutor(r -> daemon(r, "muster-gang-member-" + suffix));
    this.beats = Executors.newSingleThreadScheduledExecutor(r -> daemon(r, "muster-gang-beat-" + suffix));
    this.lastFromLauncher = clock.instant();
  }

  private static Thread daemon(Runnable r, String name) {
    Thread t = new Thread(r, name);
    t.setDaemon(true);
    return t;
  }

  /**
   * Joins the gang of {@code ref}'s attempt at {@code address}, the member running on {@code host}.
   *
   * @param launcherName the launcher in words, for messages: {@code the driver at h:p}
   */
  public static GangMember join(Channel channel, TaskRef ref, HostPort address, String host, String launcherName,
      Listener listener, Clock clock) {
    GangMember member = new GangMember(GangEndpoint.taskOf(ref), launcherName, listener, clock);
    long every = Heartbeats.EVERY.toMillis();
    member.beats.scheduleAtFixedRate(member::beat, every, every, TimeUnit.MILLISECONDS);
    GangServiceGrpc.newStub(channel).attend(member.new Incoming());
    member.send(MemberSays.newBuilder().setJoin(Join.newBuilder().setTask(ref).setAddress(address.toString())
        .setHost(host)).build());
    return member;
  }

  /**
   * Every member's address, in member order, once the whole gang has joined.
   *
   * @throws GangEndedException when the launcher says the gang will not form, the attempt ended, or
   *     {@code timeout} passes first
   */
  public List<HostPort> awaitGang(Duration timeout) throws InterruptedException {
    try {
      return CompletableFuture.anyOf(formed, aborted).thenCompose(any -> formed.isDone() ? formed
          : CompletableFuture.<List<HostPort>>failedFuture(new GangEndedException(task + ": " + aborted.join())))
          .get(timeout.toMillis(), TimeUnit.MILLISECONDS);
    } catch (ExecutionException e) {
      throw e.getCause() instanceof GangEndedException ended ? ended : new IllegalStateException(e.getCause());
    } catch (TimeoutException e) {
      throw new GangEndedException(task + ": " + launcherName + " did not answer within " + timeout.toSeconds()
          + " s whether the gang formed");
    }
  }

  /** Sends a line of the command's output (or a progress line) to the launcher; false when it cannot. */
  public boolean line(Line.Stream stream, String text) {
    return send(MemberSays.newBuilder().setLines(Lines.newBuilder().addLines(Line.newBuilder().setStream(stream)
        .setText(text))).build());
  }

  /** Passes on the member's executor's notice that it is going away, for the launcher to tell the gang. */
  public void notice(String reason) {
    send(MemberSays.newBuilder().setNotice(Notice.newBuilder().setReason(reason)).build());
  }

  /**
   * Reports the member's exit and waits for the launcher's acknowledgement ({@link Heartbeats#CALL} at most).
   *
   * @return whether the launcher wants the container offered to its next attempt
   */
  public boolean exited(Attempt.Exit exit) {
    if (!send(MemberSays.newBuilder().setExit(io.muster.proto.gang.Exit.newBuilder().setCode(exit.code())
        .setAfterGangFailure(exit.afterGangFailure()).setStory(exit.story()).addAllStderrTail(exit.stderrTail()))
        .build())) {
      return false;
    }
    try {
      return exitAck.get(Heartbeats.CALL.toMillis(), TimeUnit.MILLISECONDS);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    } catch (ExecutionException | TimeoutException e) {
      log.warn("{}: {} did not acknowledge the exit (code {}): {}", task, launcherName, exit.code(), e.toString());
    }
    return false;
  }

  /** Why the attempt ended for this member, waiting up to {@code limit} for the launcher's word. */
  public Optional<String> awaitAbort(Duration limit) throws InterruptedException {
    try {
      return Optional.of(aborted.get(limit.toMillis(), TimeUnit.MILLISECONDS));
    } catch (ExecutionException | TimeoutException e) {
      return Optional.ofNullable(aborted.getNow(null));
    }
  }

  /**
   * Ends the stream: after the exit was acknowledged, as the member's last word; before, as a member
   * lost to the launcher. A wait for the gang ends.
   */
  @Override
  public void close() {
    aborted.complete(task + " left the gang");
    synchronized (this) {
      if (!closed) {
        closed = true;
        if (out != null && acknowledged) {
          out.onCompleted();
        } else if (out != null) {
          out.cancel("the member closed its link", null);
        }
      }
    }
    beats.shutdownNow();
    listening.shutdown();
  }

  private void beat() {
    synchronized (this) {
      if (!joined) {
        return; // the launcher takes nothing before the join
      }
    }
    Instant now = clock.instant();
    long nanos = System.nanoTime();
    if (Duration.ofNanos(nanos - lastBeatNanos).compareTo(Heartbeats.EVERY.multipliedBy(3)) > 0) {
      lastFromLauncher = now; // this JVM itself did not run: what arrived meanwhile is unread
    }
    lastBeatNanos = nanos;
    send(MemberSays.newBuilder().setBeat(Beat.getDefaultInstance()).build());
    Duration silence = Duration.between(lastFromLauncher, now);
    if (silence.compareTo(Heartbeats.LAUNCHER_SILENT) >= 0) {
      lost(launcherName + " went silent: no word for " + Heartbeats.LAUNCHER_SILENT.toSeconds() + " s (this host or "
          + "the launcher's is down or cut off)");
    }
  }

  /** Sends {@code says}, waiting while the launcher has not taken what came before; false when the link is gone. */
  private synchronized boolean send(MemberSays says) {
    Instant giveUp = clock.instant().plus(Heartbeats.LAUNCHER_SILENT);
    try {
      while (!closed && out != null && !out.isReady() && clock.instant().isBefore(giveUp)) {
        wait(100);
      }
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      return false;
    }
    if (closed || out == null) {
      return false;
    }
    try {
      out.onNext(says);
      joined |= says.hasJoin();
      return true;
    } catch (RuntimeException e) {
      log.debug("{}: could not tell {} {}: {}", task, launcherName, says.getSaysCase(), e.toString());
      return false;
    }
  }

  /** Runs {@code action} on the listener's thread, in order; nothing once the member is closed. */
  private void tell(Runnable action) {
    try {
      listening.execute(action);
    } catch (java.util.concurrent.RejectedExecutionException closed) {
      log.debug("{}: closed; not told", task);
    }
  }

  private synchronized void ready() {
    notifyAll();
  }

  /**
   * The launcher is lost: the member ends as for a failed attempt. Once the attempt had ended for the
   * member (the launcher said so), losing the launcher changes nothing and is not reported.
   */
  private void lost(String reason) {
    if (aborted.complete(reason)) {
      log.error("{}: {}; ending what runs", task, reason);
      tell(() -> listener.abort(reason));
    } else {
      log.debug("{}: {}, after the attempt had ended for it", task, reason);
    }
    synchronized (this) {
      if (out != null && !closed) {
        closed = true;
        out.cancel(reason, null);
      }
      notifyAll();
    }
    exitAck.complete(false);
    beats.shutdown();
  }

  /** What arrives from the launcher. */
  private final class Incoming implements ClientResponseObserver<MemberSays, LauncherSays> {
    @Override
    public void beforeStart(ClientCallStreamObserver<MemberSays> requests) {
      synchronized (GangMember.this) {
        out = requests;
      }
      requests.setOnReadyHandler(GangMember.this::ready);
    }

    @Override
    public void onNext(LauncherSays says) {
      lastFromLauncher = clock.instant();
      switch (says.getSaysCase()) {
        case FORMED -> formed.complete(says.getFormed().getAddressesList().stream().map(HostPort::parse).toList());
        case INSTRUCTION -> instructed(says.getInstruction());
        case EXIT_ACK -> {
          acknowledged = true;
          exitAck.complete(says.getExitAck().getOfferContainer());
        }
        default -> { } // a beat
      }
    }

    private void instructed(io.muster.proto.gang.Instruction instruction) {
      String reason = instruction.getReason();
      switch (instruction.getAction()) {
        case PREEMPT -> tell(() -> listener.preempt(reason));
        case END -> tell(listener::end);
        case ABORT -> {
          if (aborted.complete(reason)) {
            tell(() -> listener.abort(reason));
          }
        }
        default -> { }
      }
    }

    @Override
    public void onError(Throwable t) {
      Status status = Status.fromThrowable(t);
      if (closedByUs()) { // its channel, shut down after the member's last word, may break the stream first
        log.debug("{}: the link ended after the member closed it: {}", task, status);
        return;
      }
      lost(status.getCode() == Status.Code.FAILED_PRECONDITION
          ? launcherName + " ended this attempt (" + status.getDescription() + ")"
          : "lost " + launcherName + " (" + status.getCode() + (status.getDescription() == null ? ""
              : ": " + status.getDescription()) + ")");
    }

    @Override
    public void onCompleted() {
      exitAck.complete(false);
      if (!formed.isDone()) {
        lost(launcherName + " closed the link before the gang formed");
      }
    }
  }

  private synchronized boolean closedByUs() {
    return closed;
  }
}
