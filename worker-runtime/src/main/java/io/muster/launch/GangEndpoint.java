package io.muster.launch;

import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import io.grpc.stub.ServerCallStreamObserver;
import io.grpc.stub.StreamObserver;
import io.muster.cluster.HostPort;
import io.muster.cluster.TaskId;
import io.muster.proto.gang.AwaitNextAttemptRequest;
import io.muster.proto.gang.AwaitNextAttemptResponse;
import io.muster.proto.gang.Beat;
import io.muster.proto.gang.ExitAck;
import io.muster.proto.gang.Formed;
import io.muster.proto.gang.GangServiceGrpc;
import io.muster.proto.gang.Instruction;
import io.muster.proto.gang.Join;
import io.muster.proto.gang.LauncherSays;
import io.muster.proto.gang.Line;
import io.muster.proto.gang.MemberSays;
import io.muster.proto.gang.TaskRef;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * A launcher's end of {@code muster.GangService}, the same on the Spark driver and the YARN
 * ApplicationMaster, served from the launcher's task server (job token, TLS when configured). It
 * carries what the members say to the launcher's current {@link Attempt} (joins, beats, notices,
 * exits, a link that ends without an exit) and what the attempt says back to every member: the
 * gang's addresses once it has formed, a beat every {@link Heartbeats#EVERY}, and a new
 * {@link Attempt.Instruction} as soon as it changes. It ticks the attempt's clock ten times a
 * beat. A member of another attempt than the current one is refused ({@code FAILED_PRECONDITION}).
 */
public final class GangEndpoint extends GangServiceGrpc.GangServiceImplBase implements AutoCloseable {

  private static final Logger log = LoggerFactory.getLogger(GangEndpoint.class);
  private static final long TICKS_PER_BEAT = 10;

  /** What the launcher does with what only it can answer. */
  public interface Launcher {
    /** A member's command printed {@code lines} (or its train function reported progress). */
    default void lines(TaskId task, List<Line> lines) {}

    /** Whether a member that exited from {@code attempt} should offer its container to the next attempt. */
    default boolean offersContainer(Attempt attempt) {
      return false;
    }

    /** A member offers its container to the next attempt; by default no attempt wants it. */
    default void awaitNextAttempt(AwaitNextAttemptRequest request,
        ServerCallStreamObserver<AwaitNextAttemptResponse> response) {
      response.onNext(AwaitNextAttemptResponse.newBuilder().setReason("this launcher keeps no container across "
          + "attempts").build());
      response.onCompleted();
    }
  }

  private final String placedIn;
  private final Launcher launcher;
  private final AtomicReference<Attempt> current = new AtomicReference<>();
  private final Set<MemberStream> streams = ConcurrentHashMap.newKeySet();
  private final ScheduledExecutorService ticks;
  private long tickCount;

  /**
   * @param placedIn what a member's {@code container_id} names: {@code container} (YARN), {@code executor} (Spark)
   */
  public GangEndpoint(String placedIn, Launcher launcher) {
    this.placedIn = placedIn;
    this.launcher = launcher;
    this.ticks = Executors.newSingleThreadScheduledExecutor(r -> {
      Thread t = new Thread(r, "muster-gang-endpoint");
      t.setDaemon(true);
      return t;
    });
    long tick = Heartbeats.EVERY.toMillis() / TICKS_PER_BEAT;
    ticks.scheduleAtFixedRate(this::tick, tick, tick, TimeUnit.MILLISECONDS);
  }

  /** From now on members join {@code attempt}; members of earlier attempts are refused. */
  public void start(Attempt attempt) {
    attempt.onChange(() -> streams.stream().filter(s -> s.attempt == attempt).forEach(MemberStream::update));
    current.set(attempt);
  }

  public Attempt current() {
    return current.get();
  }

  private void tick() {
    try {
      Attempt attempt = current.get();
      if (attempt != null) {
        attempt.tick();
      }
      if (++tickCount % TICKS_PER_BEAT == 0) {
        streams.forEach(s -> s.send(LauncherSays.newBuilder().setBeat(Beat.getDefaultInstance()).build()));
      }
    } catch (RuntimeException e) {
      log.error("the gang endpoint's tick failed", e);
    }
  }

  @Override
  public StreamObserver<MemberSays> attend(StreamObserver<LauncherSays> response) {
    return new MemberStream((ServerCallStreamObserver<LauncherSays>) response);
  }

  @Override
  public void awaitNextAttempt(AwaitNextAttemptRequest request, StreamObserver<AwaitNextAttemptResponse> response) {
    Attempt attempt = current.get();
    if (attempt == null || attempt.number() != request.getTask().getAttempt()) {
      response.onError(notCurrent(request.getTask(), attempt));
      return;
    }
    launcher.awaitNextAttempt(request, (ServerCallStreamObserver<AwaitNextAttemptResponse>) response);
  }

  /** The task a member's reference names. */
  public static TaskId taskOf(TaskRef ref) {
    return new TaskId(ref.getJob(), ref.getIndex());
  }

  private static StatusRuntimeException notCurrent(TaskRef ref, Attempt attempt) {
    return Status.FAILED_PRECONDITION.withDescription(taskOf(ref) + " in " + ref.getContainerId() + " belongs to "
        + Attempt.named(ref.getAttempt()) + ", which is not the launcher's current attempt"
        + (attempt == null ? "" : " (" + (attempt.number() + 1) + ")")).asRuntimeException();
  }

  /** One member's stream: its joining, its words, and what it is told. */
  private final class MemberStream implements StreamObserver<MemberSays> {
    private final ServerCallStreamObserver<LauncherSays> out;
    private volatile Attempt attempt;
    private TaskId task;
    private boolean formedSent; // guarded by this
    private Attempt.Instruction told = new Attempt.Instruction(Attempt.Instruction.Action.CONTINUE, "");
    private boolean exited;
    private boolean closed; // guarded by this

    MemberStream(ServerCallStreamObserver<LauncherSays> out) {
      this.out = out;
      out.setOnCancelHandler(this::linkEnded);
    }

    @Override
    public void onNext(MemberSays says) {
      if (says.hasJoin()) {
        join(says.getJoin());
        return;
      }
      if (attempt == null) {
        fail(Status.FAILED_PRECONDITION.withDescription("a member says " + says.getSaysCase() + " before it joined")
            .asRuntimeException());
        return;
      }
      if (exited) {
        return; // its beats until it closes: the attempt has its exit
      }
      attempt.heard(task);
      switch (says.getSaysCase()) {
        case NOTICE -> attempt.notice(Map.of(task, says.getNotice().getReason()))
            .ifPresent(notice -> log.warn("{}: {}; every member is told to save and leave", attempt, notice));
        case LINES -> launcher.lines(task, says.getLines().getLinesList());
        case EXIT -> exit(says.getExit());
        default -> { } // a beat: heard
      }
    }

    private void join(Join join) {
      Attempt now = current.get();
      TaskRef ref = join.getTask();
      if (attempt != null) {
        fail(Status.FAILED_PRECONDITION.withDescription(task + " joined twice on one stream").asRuntimeException());
        return;
      }
      if (now == null || now.number() != ref.getAttempt()) {
        fail(notCurrent(ref, now));
        return;
      }
      try {
        task = taskOf(ref);
        now.join(task, HostPort.parse(join.getAddress()), new Attempt.Placement(join.getHost(), placedIn + " "
            + ref.getContainerId(), java.util.Optional.empty()));
      } catch (IllegalArgumentException e) {
        fail(Status.INVALID_ARGUMENT.withDescription(e.getMessage()).asRuntimeException());
        return;
      } catch (IllegalStateException e) {
        fail(Status.FAILED_PRECONDITION.withDescription(e.getMessage()).asRuntimeException());
        return;
      }
      attempt = now;
      streams.add(this);
      log.debug("{}: {} joined at {}{}", now, task, join.getAddress(),
          now.isFormed() ? "; the gang is complete" : "");
      update(); // the others heard of the join from the attempt
    }

    private void exit(io.muster.proto.gang.Exit exit) {
      exited = true;
      attempt.exited(task, new Attempt.Exit(exit.getCode(), exit.getAfterGangFailure(), exit.getStory(),
          exit.getStderrTailList()));
      log.debug("{}: {} exited with code {}{}", attempt, task, exit.getCode(),
          exit.getAfterGangFailure() ? " (after the gang failed)" : "");
      // the stream stays open: a member that failed waits for the attempt's verdict on it
      send(LauncherSays.newBuilder().setExitAck(ExitAck.newBuilder()
          .setOfferContainer(launcher.offersContainer(attempt))).build());
    }

    /** Sends what changed for this member: the formed gang, its instruction. */
    synchronized void update() {
      if (closed || attempt == null) {
        return;
      }
      var addresses = attempt.addresses();
      if (!formedSent && addresses.isPresent()) {
        formedSent = true;
        send(LauncherSays.newBuilder().setFormed(Formed.newBuilder()
            .addAllAddresses(addresses.get().stream().map(HostPort::toString).toList())).build());
      }
      Attempt.Instruction instruction = attempt.instruction(task);
      if (!instruction.equals(told)) {
        told = instruction;
        send(LauncherSays.newBuilder().setInstruction(Instruction.newBuilder()
            .setAction(Instruction.Action.valueOf(instruction.action().name())).setReason(instruction.reason()))
            .build());
      }
    }

    synchronized void send(LauncherSays says) {
      if (closed) {
        return;
      }
      try {
        out.onNext(says);
      } catch (RuntimeException e) { // cancelled meanwhile: the cancel handler deals with it
        log.debug("could not tell {} {}: {}", task, says.getSaysCase(), e.toString());
      }
    }

    private synchronized void fail(StatusRuntimeException e) {
      log.warn("refused a member: {}", e.getStatus().getDescription());
      if (!closed) {
        closed = true;
        out.onError(e);
      }
    }

    private synchronized void close() {
      if (!closed) {
        closed = true;
        streams.remove(this);
        out.onCompleted();
      }
    }

    @Override
    public void onError(Throwable t) {
      linkEnded();
    }

    @Override
    public void onCompleted() {
      linkEnded();
      close();
    }

    private void linkEnded() {
      streams.remove(this);
      synchronized (this) {
        closed = true;
      }
      if (attempt != null && !exited) {
        attempt.linkLost(task);
      }
    }
  }

  /** Stops ticking and beating; the task server that serves this endpoint closes its streams. */
  @Override
  public void close() {
    ticks.shutdownNow();
  }
}
