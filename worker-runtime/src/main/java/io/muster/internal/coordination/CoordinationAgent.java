package io.muster.internal.coordination;

import io.muster.coordination.CoordinationException;
import io.muster.coordination.CoordinationOptions;
import io.muster.coordination.KeyValues;
import io.muster.coordination.TaskState;
import io.muster.coordination.TaskStatus;
import com.google.protobuf.ByteString;
import io.grpc.Channel;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import io.grpc.stub.StreamObserver;
import io.muster.cluster.ClusterSpec;
import io.muster.cluster.HostPort;
import io.muster.cluster.TaskId;
import io.muster.internal.Durations;
import io.muster.internal.Interrupts;
import io.muster.proto.coordination.*;
import io.muster.rpc.DeadlineExceededException;
import io.muster.rpc.PeerUnavailableException;
import io.muster.internal.rpc.Reachability;
import io.muster.internal.rpc.RefusedCall;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.SortedMap;
import java.util.TreeMap;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import java.util.function.Consumer;
import java.util.stream.Collectors;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The coordination agent every task runs: its link to the coordination service on the leader.
 *
 * <p>{@link #join()} registers this task (retrying while the leader is not up yet) and waits until
 * every coordinated task has registered, all within {@link CoordinationOptions#joinTimeout()}.
 * While it waits it logs, every {@link CoordinationOptions#progressInterval()}, which tasks are
 * missing and why (each missing task's address is probed: {@code worker 2 at 10.0.0.7:2222:
 * connection refused}); at the deadline it throws {@link DeadlineExceededException} with the same
 * account. A leader that answered once and then stops answering for longer than the heartbeat
 * timeout fails the join at once ({@code coordination leader worker 0 at host:port stopped
 * answering during the join}); one that has never answered is waited for (it may be starting). After joining, the agent sends heartbeats and long-polls the service for errors: a
 * failed peer, or a leader that stops answering, reaches the error callback once, within the
 * heartbeat timeout, and puts the agent in {@link TaskState#ERROR}. Every call has a deadline.
 *
 * <p>One file because the join, the heartbeats and the error poll share one state machine and one
 * leader channel, and whichever of them sees the failure first must be the one that reports it;
 * the barrier and key-value calls are short requests on the same channel.
 */
public final class CoordinationAgent implements KeyValues, AutoCloseable {

  private static final Logger log = LoggerFactory.getLogger(CoordinationAgent.class);
  private static final Duration PROBE_TIMEOUT = Duration.ofMillis(500);
  /** How far past the heartbeat timeout a heartbeat call may run, so that its failure finds the timeout passed. */
  private static final Duration LEADER_SILENCE_MARGIN = Duration.ofMillis(50);
  /** The shortest a heartbeat call is given, even when this task itself was paused past the timeout. */
  private static final Duration MIN_HEARTBEAT_CALL = Duration.ofMillis(500);
  /**
   * How long a task's error report may wait for the leader: the report only spares the others
   * their heartbeat timeout, and a failing task that waits longer on a silent leader leaves late.
   */
  private static final Duration REPORT_TIMEOUT = Duration.ofSeconds(2);

  private final ClusterSpec cluster;
  private final TaskId task;
  private final TaskId leader;
  private final HostPort leaderAddress;
  private final CoordinationServiceGrpc.CoordinationServiceBlockingStub blocking;
  private final CoordinationServiceGrpc.CoordinationServiceStub async;
  private final CoordinationOptions options;
  private final Consumer<CoordinationException> onError;
  private final boolean tls;
  private final long incarnation = ThreadLocalRandom.current().nextLong();
  private final ScheduledExecutorService heartbeats;
  private final Map<String, Long> barrierCounters = new HashMap<>();

  private volatile TaskState state = TaskState.DISCONNECTED;
  private volatile boolean stopping;
  /** The shutdown call while it waits at the barrier; cancelled when the leader goes silent meanwhile. */
  private volatile io.grpc.Context.CancellableContext leaving;
  private volatile String leaderLostWhileLeaving;
  private volatile long leaderIncarnation;
  private volatile long lastHeartbeatOkNanos;
  private volatile io.grpc.Context.CancellableContext pollContext;

  /**
   * @param channel the channel to the leader's task server (from the task's channel cache); the
   *     agent's calls also say which task they come from, so that a leader that refuses them can
   *     name it
   * @param tls whether the job's channels use TLS (without it, a peer's port is also checked for
   *     gRPC's HTTP/2 when explaining a wait, to tell a program that is not a Muster task)
   * @param onError told once, on a heartbeat or poll thread, when this task or a peer fails
   */
  public CoordinationAgent(ClusterSpec cluster, TaskId task, TaskId leader, Channel channel, boolean tls,
      CoordinationOptions options, Consumer<CoordinationException> onError) {
    if (!cluster.contains(task)) {
      throw new IllegalArgumentException("task " + task + " is not in the cluster " + cluster);
    }
    this.cluster = cluster;
    this.task = task;
    this.leader = leader;
    this.leaderAddress = HostPort.parse(cluster.taskAddress(leader));
    Channel identified = RefusedCall.identifying(channel, task);
    this.blocking = CoordinationServiceGrpc.newBlockingStub(identified);
    this.async = CoordinationServiceGrpc.newStub(identified);
    this.options = options;
    this.onError = onError;
    this.tls = tls;
    this.heartbeats = java.util.concurrent.Executors.newSingleThreadScheduledExecutor(r -> {
      Thread t = new Thread(r, "muster-heartbeat-" + task.job() + "-" + task.index());
      t.setDaemon(true);
      return t;
    });
  }

  public TaskState state() {
    return state;
  }

  public TaskId task() {
    return task;
  }

  /** This agent's incarnation: a new random number for every process (every agent) of a task. */
  public long incarnation() {
    return incarnation;
  }

  // ---- joining --------------------------------------------------------------------------------

  /**
   * Registers with the leader and waits for every coordinated task, within the join timeout.
   *
   * @throws DeadlineExceededException naming every missing task and why it is missing
   * @throws CoordinationException when the service refuses this task (unknown task, a restarted
   *     task, a wrong token)
   */
  public void join() {
    long start = System.nanoTime();
    long deadline = start + options.joinTimeout().toNanos();
    register(deadline);
    lastHeartbeatOkNanos = System.nanoTime();
    state = TaskState.CONNECTED;
    long interval = options.heartbeatInterval().toMillis();
    heartbeats.scheduleWithFixedDelay(this::heartbeat, interval, interval, TimeUnit.MILLISECONDS);
    poll();
    waitForAll(deadline);
    log.info("{}: all {} tasks joined in {} ms", task, cluster.allTasks().size(),
        TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start));
  }

  private void register(long deadline) {
    RegisterTaskRequest request = RegisterTaskRequest.newBuilder()
        .setSourceTask(Errors.toProto(task)).setIncarnation(incarnation).build();
    long nextLog = System.nanoTime() + options.progressInterval().toNanos();
    long lastAnswer = 0; // when the leader last answered (0: never); a leader that never has may still be starting
    for (int attempt = 0; ; attempt++) {
      try {
        leaderIncarnation = call(deadline, options.heartbeatTimeout()).registerTask(request).getLeaderIncarnation();
        return;
      } catch (StatusRuntimeException e) {
        Status.Code code = e.getStatus().getCode();
        // UNIMPLEMENTED: the leader's server is up but does not host the service yet (a launcher
        // binds every server first and starts the service once the cluster is known).
        if (code != Status.Code.UNAVAILABLE && code != Status.Code.DEADLINE_EXCEEDED && code != Status.Code.UNIMPLEMENTED) {
          // a transport failure of another kind (gRPC says "http2 exception"): what holds the port?
          Reachability.Answer probe = code == Status.Code.INTERNAL || code == Status.Code.UNKNOWN
              ? probe(leaderAddress) : new Reachability.Listening();
          if (probe instanceof Reachability.Stranger) {
            throw new PeerUnavailableException(task + " cannot register with the coordination leader " + leader
                + ": its address " + leaderAddress + " is " + probe, e);
          }
          throw Errors.toException(task + " could not register with the coordination leader " + leader
              + " at " + leaderAddress, e);
        }
        long now = System.nanoTime();
        if (code == Status.Code.UNIMPLEMENTED) {
          lastAnswer = now;
        } else if (lastAnswer != 0 && now - lastAnswer > options.heartbeatTimeout().toNanos()) {
          throw new PeerUnavailableException(leaderStoppedAnswering() + " (no answer for "
              + TimeUnit.NANOSECONDS.toMillis(now - lastAnswer) + " ms, heartbeat timeout " + options.heartbeatTimeout()
              + "): " + leaderUnreachable(e), e);
        }
        String why = code == Status.Code.UNIMPLEMENTED
            ? "coordination leader " + leader + " at " + leaderAddress + ": its server answers but does not host the "
                + "coordination service (yet); is this address really the leader's TF_CONFIG address?"
            : leaderUnreachable(e);
        if (now >= deadline) {
          throw new DeadlineExceededException(task + " could not register with the coordination service within "
              + Durations.words(options.joinTimeout()) + ": " + why, options.joinTimeout());
        }
        if (now >= nextLog) {
          log.warn("{} still waiting for {}", task, why);
          nextLog = now + options.progressInterval().toNanos();
        }
        long backoffMs = Math.min(1000, 10L << Math.min(attempt, 7));
        sleepUntil(Math.min(deadline, now + TimeUnit.MILLISECONDS.toNanos(backoffMs)));
      }
    }
  }

  /** The words a join's error starts with when a leader that answered once is gone. */
  private String leaderStoppedAnswering() {
    return task + ": coordination leader " + leader + " at " + leaderAddress + " stopped answering during the join";
  }

  private void waitForAll(long deadline) {
    WaitForAllTasksRequest request = WaitForAllTasksRequest.newBuilder().setSourceTask(Errors.toProto(task)).build();
    while (true) {
      try {
        call(deadline, options.progressInterval()).waitForAllTasks(request);
        return;
      } catch (StatusRuntimeException e) {
        if (e.getStatus().getCode() == Status.Code.UNAUTHENTICATED && Errors.coordinationPayload(e) != null) {
          // the service refused a peer's calls for their token: that peer will not join
          throw Errors.toException(task + " cannot complete the cluster", e);
        }
        if (e.getStatus().getCode() != Status.Code.DEADLINE_EXCEEDED) {
          if (e.getStatus().getCode() == Status.Code.UNAVAILABLE) {
            throw new PeerUnavailableException(leaderStoppedAnswering() + " (it lost the call waiting for all tasks): "
                + leaderUnreachable(e) + "; " + describeUnreachable(), e);
          }
          // The leader gave up (its own deadline came first) or refused: say what this task can still see.
          throw Errors.toException(task + " failed while waiting for all tasks", e, "; " + describeUnreachable());
        }
        String missing = describeMissing();
        if (System.nanoTime() >= deadline) {
          throw new DeadlineExceededException(task + " timed out after " + Durations.words(options.joinTimeout())
              + " waiting for all tasks to join the coordination service; " + missing, options.joinTimeout());
        }
        log.warn("{} still waiting for tasks to join; {}", task, missing);
      }
    }
  }

  /** Which tasks have not registered, each with the result of probing its address. */
  private String describeMissing() {
    List<TaskStatus> states;
    try {
      states = taskStates();
    } catch (CoordinationException e) {
      return "cannot ask the coordination leader which tasks are missing: " + e.getMessage();
    }
    List<TaskStatus> missing = states.stream().filter(s -> s.state() != TaskState.CONNECTED).toList();
    List<CompletableFuture<String>> probes = new ArrayList<>();
    for (TaskStatus s : missing) {
      String address = cluster.taskAddress(s.task());
      probes.add(CompletableFuture.supplyAsync(() -> {
        if (s.state() == TaskState.ERROR) {
          return s.task() + " at " + address + ": in error: " + s.error().orElse("");
        }
        if (s.error().isPresent()) { // what the service said to its last attempt (refused: wrong job token)
          return s.task() + " at " + address + ": " + s.error().get();
        }
        Reachability.Answer probe = probe(HostPort.parse(address));
        return s.task() + " at " + address + ": " + (probe instanceof Reachability.Listening
            ? "listening, but not registered with the coordination service" : probe);
      }));
    }
    return missing.size() + " of " + states.size() + " tasks missing: "
        + probes.stream().map(CompletableFuture::join).collect(Collectors.joining("; "));
  }

  /** Without the service: the other tasks whose address does not answer from here. */
  private String describeUnreachable() {
    List<CompletableFuture<String>> probes = cluster.allTasks().stream().filter(t -> !t.equals(task))
        .map(t -> CompletableFuture.supplyAsync(() -> {
          String address = cluster.taskAddress(t);
          Reachability.Answer probe = probe(HostPort.parse(address));
          return probe instanceof Reachability.Listening ? null : t + " at " + address + ": " + probe;
        })).toList();
    List<String> down = probes.stream().map(CompletableFuture::join).filter(java.util.Objects::nonNull).toList();
    return down.isEmpty() ? "every other task's address answers from " + task
        : "not answering from " + task + ": " + String.join("; ", down);
  }

  /** What answers at a peer's address: gRPC, something else, or nothing, and why. */
  private Reachability.Answer probe(HostPort address) {
    return tls ? Reachability.probe(address, PROBE_TIMEOUT) : Reachability.identify(address, PROBE_TIMEOUT);
  }

  private String leaderUnreachable(StatusRuntimeException e) {
    Reachability.Answer probe = probe(leaderAddress);
    String detail = probe instanceof Reachability.Listening ? e.getStatus().getCode() + " "
        + e.getStatus().getDescription() : probe.toString();
    return "coordination leader " + leader + " at " + leaderAddress + ": " + detail;
  }

  // ---- liveness -------------------------------------------------------------------------------

  private void heartbeat() {
    if (state != TaskState.CONNECTED && state != TaskState.ERROR) {
      return;
    }
    try {
      // The call may take until just past the heartbeat timeout since the last answer: failing a hair
      // before it would leave the silence short of the timeout and put the verdict off a whole interval.
      long untilTimeout = lastHeartbeatOkNanos + options.heartbeatTimeout().toNanos() + LEADER_SILENCE_MARGIN.toNanos()
          - System.nanoTime();
      Duration limit = Duration.ofNanos(Math.max(untilTimeout, MIN_HEARTBEAT_CALL.toNanos()));
      long leaderNow = call(System.nanoTime() + limit.toNanos(), limit)
          .heartbeat(HeartbeatRequest.newBuilder().setSourceTask(Errors.toProto(task)).setIncarnation(incarnation).build())
          .getLeaderIncarnation();
      lastHeartbeatOkNanos = System.nanoTime();
      if (leaderNow != leaderIncarnation) {
        setError(new CoordinationException(Status.Code.ABORTED, "Leader incarnation ID mismatch: the coordination "
            + "leader " + leader + " at " + leaderAddress + " has restarted; this job must restart too.", leader, null));
      }
    } catch (StatusRuntimeException e) {
      Status.Code code = e.getStatus().getCode();
      boolean transientFailure = code == Status.Code.UNAVAILABLE || code == Status.Code.DEADLINE_EXCEEDED;
      long silent = System.nanoTime() - lastHeartbeatOkNanos;
      if (stopping) {
        io.grpc.Context.CancellableContext shutdownCall = leaving;
        if (shutdownCall != null && transientFailure && silent >= options.heartbeatTimeout().toNanos()) {
          // the leader went silent while this task waits at the shutdown barrier: do not wait out its deadline
          leaderLostWhileLeaving = "no heartbeat answer for " + TimeUnit.NANOSECONDS.toMillis(silent) + " ms (timeout "
              + options.heartbeatTimeout() + "): " + leaderUnreachable(e);
          shutdownCall.cancel(null);
        }
        return;
      }
      if (!transientFailure) {
        setError(Errors.toException(task + " heartbeat refused by the coordination leader " + leader, e));
      } else if (silent >= options.heartbeatTimeout().toNanos()) {
        setError(new CoordinationException(code, task + " has had no heartbeat answer for "
            + TimeUnit.NANOSECONDS.toMillis(silent) + " ms (timeout " + options.heartbeatTimeout() + "): "
            + leaderUnreachable(e), leader, e));
      }
    }
  }

  private void poll() {
    if (stopping) {
      return;
    }
    io.grpc.Context.CancellableContext context = io.grpc.Context.current().withCancellation();
    pollContext = context;
    context.run(() -> async.pollForError(PollForErrorRequest.newBuilder().setSourceTask(Errors.toProto(task)).build(),
        new StreamObserver<>() {
          @Override
          public void onNext(PollForErrorResponse value) {}

          @Override
          public void onError(Throwable t) {
            if (stopping) {
              return;
            }
            if (Errors.coordinationPayload(t) != null) {
              setError(Errors.toException(task + " was told by the coordination leader " + leader + " at " + leaderAddress, t));
            } else {
              // Transport trouble: the heartbeat decides whether the leader is gone; ask again later.
              reschedulePoll();
            }
          }

          @Override
          public void onCompleted() {
            reschedulePoll();
          }
        }));
  }

  private void reschedulePoll() {
    if (!stopping && !heartbeats.isShutdown()) {
      heartbeats.schedule(this::poll, options.heartbeatInterval().toMillis(), TimeUnit.MILLISECONDS);
    }
  }

  private void setError(CoordinationException error) {
    synchronized (this) {
      if (state == TaskState.ERROR || stopping) {
        return;
      }
      state = TaskState.ERROR;
    }
    log.error(error.getMessage());
    try {
      onError.accept(error);
    } catch (RuntimeException e) {
      log.error("{}: the error callback threw", task, e);
    }
  }

  /**
   * Reports an error of this task to the service, which marks the task failed and tells every
   * other task; waits at most {@link #REPORT_TIMEOUT} (or the heartbeat timeout, if shorter). The
   * report goes out from a thread being interrupted too (a killed task's), which keeps its
   * interrupt: the report is what spares the others their wait.
   */
  public void reportError(Status.Code code, String message) {
    Duration wait = REPORT_TIMEOUT.compareTo(options.heartbeatTimeout()) < 0 ? REPORT_TIMEOUT
        : options.heartbeatTimeout();
    Interrupts.setAsideWhile(() -> { // gRPC's blocking call would give up at once on it
      try {
        call(System.nanoTime() + wait.toNanos(), wait).reportErrorToService(ReportErrorToServiceRequest.newBuilder()
            .setErrorCode(code.value()).setErrorMessage(message).setErrorOrigin(Errors.toProto(task)).build());
      } catch (StatusRuntimeException e) {
        throw Errors.toException(task + " could not report its error to the coordination service", e);
      }
    });
  }

  /** Every coordinated task's state at the service, jobs by name and tasks by index. */
  public List<TaskStatus> taskStates() {
    try {
      return call().getTaskState(GetTaskStateRequest.getDefaultInstance()).getTaskStateList().stream()
          .map(info -> new TaskStatus(Errors.fromProto(info.getTask()), TaskStates.fromProto(info.getState()),
              info.getErrorMessage().isEmpty() ? Optional.empty() : Optional.of(info.getErrorMessage()),
              info.getIncarnation()))
          .toList();
    } catch (StatusRuntimeException e) {
      throw Errors.toException("GetTaskState failed", e);
    }
  }

  // ---- key-value store ------------------------------------------------------------------------

  @Override
  public void insert(String key, byte[] value, boolean allowOverwrite) {
    try {
      call().insertKeyValue(InsertKeyValueRequest.newBuilder().setAllowOverwrite(allowOverwrite)
          .setKv(KeyValueEntry.newBuilder().setKey(key).setValue(ByteString.copyFrom(value))).build());
    } catch (StatusRuntimeException e) {
      throw Errors.toException("InsertKeyValue " + key, e);
    }
  }

  @Override
  public byte[] get(String key, Duration timeout) {
    try {
      return call(System.nanoTime() + timeout.toNanos(), timeout)
          .getKeyValue(GetKeyValueRequest.newBuilder().setKey(key).build()).getKv().getValue().toByteArray();
    } catch (StatusRuntimeException e) {
      if (e.getStatus().getCode() == Status.Code.DEADLINE_EXCEEDED) {
        throw new DeadlineExceededException("GetKeyValue() timed out with key: " + key + " after " + timeout, timeout);
      }
      throw Errors.toException("GetKeyValue " + key, e);
    }
  }

  /** The value at a key if it is there now. */
  public Optional<byte[]> tryGet(String key) {
    try {
      return Optional.of(call().tryGetKeyValue(TryGetKeyValueRequest.newBuilder().setKey(key).build())
          .getKv().getValue().toByteArray());
    } catch (StatusRuntimeException e) {
      if (e.getStatus().getCode() == Status.Code.NOT_FOUND) {
        return Optional.empty();
      }
      throw Errors.toException("TryGetKeyValue " + key, e);
    }
  }

  /** Every key under {@code directory/} with its value, sorted by key. */
  public SortedMap<String, byte[]> getDir(String directory) {
    try {
      SortedMap<String, byte[]> out = new TreeMap<>();
      call().getKeyValueDir(GetKeyValueDirRequest.newBuilder().setDirectoryKey(directory).build())
          .getKvList().forEach(kv -> out.put(kv.getKey(), kv.getValue().toByteArray()));
      return out;
    } catch (StatusRuntimeException e) {
      throw Errors.toException("GetKeyValueDir " + directory, e);
    }
  }

  /** Deletes the key and everything under {@code key/}. */
  public void delete(String key) {
    try {
      call().deleteKeyValue(DeleteKeyValueRequest.newBuilder().setKey(key).build());
    } catch (StatusRuntimeException e) {
      throw Errors.toException("DeleteKeyValue " + key, e);
    }
  }

  /** Adds to the 8-byte counter at the key (0 when absent) and returns the new value. */
  public long increment(String key, long delta) {
    try {
      return call().incrementKeyValue(IncrementKeyValueRequest.newBuilder().setKey(key).setIncrement(delta).build())
          .getKv().getValue().asReadOnlyByteBuffer().getLong();
    } catch (StatusRuntimeException e) {
      throw Errors.toException("IncrementKeyValue " + key, e);
    }
  }

  // ---- barriers -------------------------------------------------------------------------------

  /**
   * Waits until every task of the barrier (all coordinated tasks when {@code tasks} is empty) has
   * called it with the same id. The same id may be used again; each use is a new barrier.
   *
   * @throws CoordinationException DEADLINE_EXCEEDED naming the tasks that did not arrive in time;
   *     INTERNAL when a participant is in error; CANCELLED when a task cancelled it
   */
  public void barrier(String id, Duration timeout, Collection<TaskId> tasks) {
    long counter;
    synchronized (barrierCounters) {
      counter = barrierCounters.merge(id, 1L, Long::sum) - 1;
    }
    BarrierRequest.Builder request = BarrierRequest.newBuilder().setBarrierId(id).setCounter(counter)
        .setBarrierTimeoutInMs(timeout.toMillis()).setSourceTask(Errors.toProto(task));
    tasks.forEach(t -> request.addTasks(Errors.toProto(t)));
    // The service decides the timeout; the call's own deadline only guards against a lost leader.
    Duration callDeadline = timeout.plus(options.heartbeatTimeout());
    try {
      call(System.nanoTime() + callDeadline.toNanos(), callDeadline).barrier(request.build());
    } catch (StatusRuntimeException e) {
      throw Errors.toException("barrier '" + id + "'", e);
    }
  }

  /** Fails the current use of a barrier for every task waiting at it. */
  public void cancelBarrier(String id) {
    long counter;
    synchronized (barrierCounters) {
      counter = barrierCounters.getOrDefault(id, 0L);
    }
    try {
      call().cancelBarrier(CancelBarrierRequest.newBuilder().setBarrierId(id).setCounter(counter)
          .setSourceTask(Errors.toProto(task)).build());
    } catch (StatusRuntimeException e) {
      throw Errors.toException("CancelBarrier '" + id + "'", e);
    }
  }

  // ---- leaving --------------------------------------------------------------------------------

  /**
   * Leaves the job: with a shutdown barrier configured, waits for every task to shut down too, so
   * the leader does not stop serving while others still need it. Heartbeats go on until then.
   *
   * @throws CoordinationException when the shutdown barrier fails
   */
  public void shutdown() {
    if (state == TaskState.DISCONNECTED && !stopping) {
      stopping = true;
      stopBackground();
      return;
    }
    stopping = true;
    io.grpc.Context.CancellableContext context = io.grpc.Context.current().withCancellation();
    leaving = context;
    io.grpc.Context previous = context.attach();
    try {
      Duration wait = options.shutdownBarrierTimeout().plus(options.heartbeatTimeout());
      call(System.nanoTime() + wait.toNanos(), wait)
          .shutdownTask(ShutdownTaskRequest.newBuilder().setSourceTask(Errors.toProto(task)).build());
    } catch (StatusRuntimeException e) {
      String lost = leaderLostWhileLeaving;
      if (lost != null) {
        throw new CoordinationException(Status.Code.UNAVAILABLE, task + " shutdown: the coordination leader " + leader
            + " was lost at the shutdown barrier: " + lost, leader, e);
      }
      throw Errors.toException(task + " shutdown", e);
    } finally {
      context.detach(previous);
      leaving = null;
      context.cancel(null);
      stopBackground();
      state = TaskState.DISCONNECTED;
    }
  }

  /** After an error: tells the service this task may register again (then call {@link #join()} on a new agent). */
  public void reset() {
    try {
      call().resetTask(ResetTaskRequest.newBuilder().setSourceTask(Errors.toProto(task)).build());
    } catch (StatusRuntimeException e) {
      throw Errors.toException(task + " reset", e);
    }
  }

  /** Stops heartbeats and polling without telling the service (use {@link #shutdown()} for a clean exit). */
  @Override
  public void close() {
    stopping = true;
    stopBackground();
  }

  private void stopBackground() {
    heartbeats.shutdownNow();
    io.grpc.Context.CancellableContext context = pollContext;
    if (context != null) {
      context.cancel(null);
    }
  }

  private CoordinationServiceGrpc.CoordinationServiceBlockingStub call() {
    return call(System.nanoTime() + options.heartbeatTimeout().toNanos(), options.heartbeatTimeout());
  }

  /** A stub whose deadline is {@code limit} from now, but never past {@code deadlineNanos}. */
  private CoordinationServiceGrpc.CoordinationServiceBlockingStub call(long deadlineNanos, Duration limit) {
    long remaining = Math.min(deadlineNanos - System.nanoTime(), limit.toNanos());
    return blocking.withDeadlineAfter(Math.max(remaining, TimeUnit.MILLISECONDS.toNanos(1)), TimeUnit.NANOSECONDS);
  }

  private static void sleepUntil(long nanoTime) {
    long ms = TimeUnit.NANOSECONDS.toMillis(nanoTime - System.nanoTime());
    if (ms > 0) {
      try {
        Thread.sleep(ms);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        throw new IllegalStateException("interrupted while waiting for the coordination leader", e);
      }
    }
  }
}
