package io.muster.internal.coordination;

import io.muster.coordination.CoordinationOptions;
import com.google.protobuf.ByteString;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import io.grpc.stub.ServerCallStreamObserver;
import io.grpc.stub.StreamObserver;
import io.muster.cluster.ClusterSpec;
import io.muster.cluster.TaskId;
import io.muster.internal.rpc.RefusedCall;
import io.muster.proto.coordination.*;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import java.util.stream.Collectors;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * TensorFlow's coordination service, hosted on the coordination leader's task server.
 *
 * <p>Tasks register with an incarnation id (a restarted task, with a new id, is refused and
 * declared failed rather than silently accepted), send heartbeats, wait for each other, meet at
 * barriers and share a key-value store. A task silent for longer than the heartbeat timeout is
 * declared failed, and the failure reaches every other connected task through its pending
 * {@code PollForError} call, as in TensorFlow's setup without service-to-client channels. Errors
 * carry TensorFlow's status codes, messages and payloads; messages also name the task's address.
 * {@code ReportErrorToTask}, {@code GetAliveTasks} and {@code WatchJobState} are not served.
 *
 * <p>One file because registration, heartbeats, error polls, barriers and shutdown all read and
 * change one table of tasks under one lock: a task's failure must fail its barriers and reach every
 * poll in the same step. What holds no such state is apart: {@link Barriers}, {@link KeyValueStore},
 * {@link Errors}, {@link RefusedCaller}.
 */
public final class CoordinationService extends CoordinationServiceGrpc.CoordinationServiceImplBase
    implements AutoCloseable {

  static final String SHUTDOWN_BARRIER = "[Shutdown]Wait_for_all_tasks_to_shut_down";
  private static final Logger log = LoggerFactory.getLogger(CoordinationService.class);
  private static final Duration STALENESS_CHECK = Duration.ofMillis(250);

  private final CoordinationOptions options;
  private final long leaderIncarnation = ThreadLocalRandom.current().nextLong();
  private final Map<TaskId, Task> tasks = new TreeMap<>();
  private final Barriers barriers;
  private final KeyValueStore store = new KeyValueStore();
  private final Set<StreamObserver<?>> blockedGets = new java.util.HashSet<>();
  private final List<StreamObserver<WaitForAllTasksResponse>> waitingForAll = new ArrayList<>();
  private final ScheduledExecutorService timer;
  private boolean allRegistered;
  private StatusRuntimeException registrationFailure;
  private boolean closed;

  /** One coordinated task's record at the service: its state, and the errors on their way to it. */
  private static final class Task {
    final TaskId id;
    final String address;
    final TaskStateMachine lifecycle;
    StreamObserver<PollForErrorResponse> poll;
    StatusRuntimeException undeliveredError;
    /** What this task's last call was told at the leader's token check, until it registers. */
    String refusal;

    Task(TaskId id, String address, boolean recoverable) {
      this.id = id;
      this.address = address;
      this.lifecycle = new TaskStateMachine(id, describe(), recoverable);
    }

    String describe() {
      return id.fullName() + " (" + address + ")";
    }
  }

  /** A service coordinating the given tasks of the cluster, none of them recoverable. */
  public CoordinationService(ClusterSpec cluster, Collection<TaskId> coordinated, CoordinationOptions options) {
    this(cluster, coordinated, options, Set.of());
  }

  /**
   * A service coordinating the given tasks of the cluster. Tasks of the recoverable jobs may fail
   * and come back (register with a new incarnation) while the job runs; their failures are not
   * propagated to the other tasks, who learn of them from {@code GetTaskState}.
   */
  public CoordinationService(ClusterSpec cluster, Collection<TaskId> coordinated, CoordinationOptions options,
      Set<String> recoverableJobs) {
    if (coordinated.isEmpty()) {
      throw new IllegalArgumentException("the coordination service needs at least one task to coordinate");
    }
    this.options = options;
    for (TaskId id : coordinated) {
      tasks.put(id, new Task(id, cluster.taskAddress(id), recoverableJobs.contains(id.job())));
    }
    this.timer = java.util.concurrent.Executors.newSingleThreadScheduledExecutor(r -> {
      Thread t = new Thread(r, "muster-coordination-service");
      t.setDaemon(true);
      return t;
    });
    this.barriers = new Barriers(timer, this, id -> tasks.get(id).describe(),
        id -> Optional.ofNullable(tasks.get(id).lifecycle.error()).map(e -> e.getStatus().getDescription()));
    // TensorFlow checks every second; every 250 ms a task silent for the timeout is declared failed
    // within a quarter second of it, not a second (its peers' deadline is the timeout plus a second)
    Duration period = options.heartbeatTimeout().dividedBy(2).compareTo(STALENESS_CHECK) < 0
        ? options.heartbeatTimeout().dividedBy(2) : STALENESS_CHECK;
    timer.scheduleWithFixedDelay(this::checkHeartbeats, period.toMillis(), period.toMillis(), TimeUnit.MILLISECONDS);
  }

  /** A service coordinating every task of the cluster. */
  public static CoordinationService forAllTasks(ClusterSpec cluster, CoordinationOptions options) {
    return new CoordinationService(cluster, cluster.allTasks(), options);
  }

  /** A service coordinating every task of the cluster, the tasks of {@code recoverableJobs} recoverable. */
  public static CoordinationService forAllTasks(ClusterSpec cluster, CoordinationOptions options,
      Set<String> recoverableJobs) {
    return new CoordinationService(cluster, cluster.allTasks(), options, recoverableJobs);
  }

  // ---- registration, heartbeats, errors -------------------------------------------------------

  @Override
  public synchronized void registerTask(RegisterTaskRequest request, StreamObserver<RegisterTaskResponse> response) {
    Task task = lookup(request.getSourceTask());
    if (task == null) {
      fail(response, unknownTask(request.getSourceTask(), "registered"));
      return;
    }
    switch (task.lifecycle.register(request.getIncarnation(), System.nanoTime())) {
      case CONNECTED -> connected(task);
      case ALREADY_CONNECTED -> { }
      case RESTARTED -> {
        failed(task);
        propagate(task, Status.Code.ABORTED, "Task " + task.describe() + " has restarted (new incarnation) "
            + "while the job was running; the job must be restarted.", false);
        fail(response, task.lifecycle.error());
        return;
      }
      case REFUSED_IN_ERROR -> {
        fail(response, Errors.error(Status.Code.ABORTED, task.describe() + " unexpectedly tried to connect while it is "
            + "already in error (" + task.lifecycle.error().getStatus().getDescription() + "). ResetTask() should be "
            + "called before a subsequent connect attempt.", task.id, false));
        return;
      }
    }
    reply(response, RegisterTaskResponse.newBuilder().setLeaderIncarnation(leaderIncarnation).build());
  }

  private void connected(Task task) {
    task.undeliveredError = null;
    task.refusal = null;
    long connected = tasks.values().stream().filter(t -> t.lifecycle.connected()).count();
    log.info("{} registered ({} of {} tasks connected)", task.describe(), connected, tasks.size());
    if (!allRegistered && connected == tasks.size()) {
      allRegistered = true;
      WaitForAllTasksResponse done = WaitForAllTasksResponse.newBuilder().setLeaderIncarnation(leaderIncarnation).build();
      waitingForAll.forEach(w -> reply(w, done));
      waitingForAll.clear();
    }
  }

  @Override
  public synchronized void heartbeat(HeartbeatRequest request, StreamObserver<HeartbeatResponse> response) {
    Task task = lookup(request.getSourceTask());
    if (task == null) {
      fail(response, unknownTask(request.getSourceTask(), "sent a heartbeat"));
      return;
    }
    switch (task.lifecycle.heartbeat(request.getIncarnation(), System.nanoTime())) {
      case ACCEPTED -> reply(response, HeartbeatResponse.newBuilder().setLeaderIncarnation(leaderIncarnation).build());
      case REFUSED_IN_ERROR -> fail(response, Errors.error(Status.Code.ABORTED, "Unexpected heartbeat request from an "
          + "already-in-error task: " + task.describe() + " (" + task.lifecycle.error().getStatus().getDescription() + ")",
          task.id, false));
      case REFUSED_NOT_CONNECTED -> fail(response, Errors.error(Status.Code.INVALID_ARGUMENT, "Task " + task.describe()
          + " must be registered before sending heartbeat messages", task.id, false));
      case RESTARTED -> {
        failed(task);
        propagate(task, Status.Code.ABORTED, "Task " + task.describe() + " has restarted while the job was running.",
            false);
        fail(response, task.lifecycle.error());
      }
    }
  }

  private synchronized void checkHeartbeats() {
    long now = System.nanoTime();
    List<Task> stale = tasks.values().stream()
        .filter(t -> t.lifecycle.heartbeatOverdue(now, options.heartbeatTimeout()))
        .toList();
    if (stale.isEmpty() || closed) {
      return;
    }
    for (Task task : stale) {
      log.error("{} missed its heartbeats for {}; declaring it failed", task.describe(), options.heartbeatTimeout());
      task.lifecycle.heartbeatTimedOut();
      failed(task);
    }
    List<Task> unrecoverable = stale.stream().filter(t -> !t.lifecycle.recoverable()).toList();
    if (unrecoverable.isEmpty()) {
      return;
    }
    // TensorFlow's words, the tasks on the first line: that is the line a failed task prints
    String names = unrecoverable.stream().limit(3).map(Task::describe).collect(Collectors.joining(", "));
    propagate(unrecoverable.get(0), Status.Code.UNAVAILABLE, "The following tasks are unhealthy (stopped sending "
        + "heartbeats for " + inWords(options.heartbeatTimeout()) + "): " + names + "\nThe tasks have crashed or "
        + "are cut off. Check the task logs for an earlier error to debug further.", false);
  }

  /** {@code 10 s}, or {@code 500 ms} for a timeout that is not whole seconds. */
  private static String inWords(Duration d) {
    return d.toMillis() % 1000 == 0 ? d.toSeconds() + " s" : d.toMillis() + " ms";
  }

  @Override
  public synchronized void reportErrorToService(ReportErrorToServiceRequest request,
      StreamObserver<ReportErrorToServiceResponse> response) {
    Task task = lookup(request.getErrorOrigin());
    if (task == null) {
      fail(response, unknownTask(request.getErrorOrigin(), "reported an error"));
      return;
    }
    Status.Code code = Status.fromCodeValue(request.getErrorCode()).getCode();
    log.error("{} reported an error: {}: {}", task.describe(), code, request.getErrorMessage());
    task.lifecycle.errorReported(code, request.getErrorMessage());
    failed(task);
    propagate(task, code, "Task " + task.describe() + " reported an error: " + request.getErrorMessage(), true);
    reply(response, ReportErrorToServiceResponse.getDefaultInstance());
  }

  @Override
  public synchronized void pollForError(PollForErrorRequest request, StreamObserver<PollForErrorResponse> response) {
    Task task = lookup(request.getSourceTask());
    if (task == null) {
      fail(response, unknownTask(request.getSourceTask(), "polled for errors"));
      return;
    }
    if (task.undeliveredError != null) {
      fail(response, task.undeliveredError);
      task.undeliveredError = null;
      return;
    }
    if (!task.lifecycle.connected()) {
      fail(response, Errors.error(Status.Code.FAILED_PRECONDITION, "Task " + task.describe()
          + " must be registered before polling for errors", task.id, false));
      return;
    }
    if (task.poll != null) {
      fail(task.poll, Status.CANCELLED.withDescription("superseded by a newer PollForError call").asRuntimeException());
    }
    task.poll = response;
    onCancel(response, () -> {
      synchronized (this) {
        if (task.poll == response) {
          task.poll = null;
        }
      }
    });
  }

  /** After the task went to ERROR: tells the task itself, and fails what waits on it. */
  private void failed(Task task) {
    StatusRuntimeException error = task.lifecycle.error();
    deliver(task, error);
    barriers.failBarriersOf(task.id, error.getStatus().getDescription());
    if (!allRegistered) {
      StatusRuntimeException failed = Errors.error(Status.Code.INTERNAL,
          "Cluster registration failed with error: " + error.getStatus().getDescription(), task.id, false);
      waitingForAll.forEach(w -> fail(w, failed));
      waitingForAll.clear();
    }
  }

  /** Sends an error that started at {@code source} to every other connected task, unless the source is recoverable. */
  private void propagate(Task source, Status.Code code, String message, boolean reported) {
    if (source.lifecycle.recoverable()) {
      return;
    }
    StatusRuntimeException error = Errors.error(code, message, source.id, reported);
    tasks.values().stream()
        .filter(t -> t != source && t.lifecycle.connected())
        .forEach(t -> deliver(t, error));
  }

  private void deliver(Task task, StatusRuntimeException error) {
    if (task.poll != null) {
      fail(task.poll, error);
      task.poll = null;
    } else if (task.undeliveredError == null) {
      task.undeliveredError = error;
    }
  }

  @Override
  public synchronized void getTaskState(GetTaskStateRequest request, StreamObserver<GetTaskStateResponse> response) {
    GetTaskStateResponse.Builder states = GetTaskStateResponse.newBuilder();
    Collection<Task> wanted = request.getSourceTaskCount() == 0 ? tasks.values()
        : request.getSourceTaskList().stream().map(p -> tasks.get(Errors.fromProto(p))).toList();
    for (Task task : wanted) {
      if (task == null) {
        fail(response, Errors.error(Status.Code.INVALID_ARGUMENT, "GetTaskState asked for a task that is not "
            + "coordinated; coordinated tasks: " + tasks.keySet(), null, false));
        return;
      }
      CoordinatedTaskStateInfo.Builder info = CoordinatedTaskStateInfo.newBuilder()
          .setTask(Errors.toProto(task.id)).setState(TaskStates.toProto(task.lifecycle.state()))
          .setIncarnation(task.lifecycle.incarnation());
      StatusRuntimeException error = task.lifecycle.error();
      if (error != null) {
        info.setErrorCode(error.getStatus().getCode().value())
            .setErrorMessage(String.valueOf(error.getStatus().getDescription()))
            .setErrorPayload(CoordinationServiceError.newBuilder().setSourceTask(Errors.toProto(task.id)));
      } else if (task.refusal != null) {
        info.setErrorCode(Status.Code.UNAUTHENTICATED.value()).setErrorMessage(task.refusal);
      }
      states.addTaskState(info);
    }
    reply(response, states.build());
  }

  /**
   * A call the leader's server refused at its token check. When it says it came from a coordinated
   * task that has not registered, and came from that task's host, the task is named as refused
   * (its calls will never be let in), and the cluster's registration fails at once for every task
   * waiting for it, instead of at the join deadline. A call that claims no task, a registered
   * task, or a task on another host only goes to the log.
   */
  public void callerRefused(RefusedCall call) {
    // the task map is fixed at construction; the host check resolves names, outside the lock
    Task task = RefusedCaller.claimedTask(call).map(tasks::get).orElse(null);
    if (task == null) {
      log.warn("refused a call from {} ({}) claiming to be {}", call.from(), call.why(),
          call.claimedTask().orElse("no task"));
      return;
    }
    if (!RefusedCaller.fromHostOf(task.address, call)) {
      log.warn("refused a call claiming to be {} from {}, which is not its host ({}); not taken as {}'s",
          task.describe(), call.from(), call.why(), task.id);
      return;
    }
    refused(task, call);
  }

  private synchronized void refused(Task task, RefusedCall call) {
    if (task.lifecycle.connected() || task.lifecycle.error() != null || closed) {
      log.warn("refused a call claiming to be {}, which is {} ({})", task.describe(), task.lifecycle.state(),
          call.why());
      return;
    }
    task.refusal = "refused: " + call.why();
    log.warn("{} {}", task.describe(), task.refusal);
    if (!allRegistered && registrationFailure == null) {
      registrationFailure = Errors.error(Status.Code.UNAUTHENTICATED, task.id + " at " + task.address + ": "
          + task.refusal + " (its calls carry a MUSTER_JOB_TOKEN other than this task's; every task of a job "
          + "needs the same)", task.id, false);
      waitingForAll.forEach(w -> fail(w, registrationFailure));
      waitingForAll.clear();
    }
  }

  // ---- waiting for all, shutdown, reset -------------------------------------------------------

  @Override
  public synchronized void waitForAllTasks(WaitForAllTasksRequest request, StreamObserver<WaitForAllTasksResponse> response) {
    Task task = lookup(request.getSourceTask());
    if (task == null) {
      fail(response, unknownTask(request.getSourceTask(), "waited for all tasks"));
      return;
    }
    if (!task.lifecycle.connected()) {
      fail(response, Errors.error(Status.Code.FAILED_PRECONDITION, "Task " + task.describe()
          + " must be registered before waiting for all tasks; it is " + task.lifecycle.state(), task.id, false));
      return;
    }
    if (allRegistered) {
      reply(response, WaitForAllTasksResponse.newBuilder().setLeaderIncarnation(leaderIncarnation).build());
      return;
    }
    if (registrationFailure != null) {
      fail(response, registrationFailure);
      return;
    }
    waitingForAll.add(response);
    onCancel(response, () -> {
      synchronized (this) {
        waitingForAll.remove(response);
      }
    });
  }

  @Override
  public synchronized void shutdownTask(ShutdownTaskRequest request, StreamObserver<ShutdownTaskResponse> response) {
    Task task = lookup(request.getSourceTask());
    if (task == null) {
      fail(response, unknownTask(request.getSourceTask(), "shut down"));
      return;
    }
    if (options.shutdownBarrierTimeout().isZero()) {
      disconnect(task);
      reply(response, ShutdownTaskResponse.getDefaultInstance());
      return;
    }
    barriers.arrive(SHUTDOWN_BARRIER, 0, options.shutdownBarrierTimeout(), new TreeSet<>(tasks.keySet()), task.id, error -> {
      disconnect(task);
      if (error == null) {
        reply(response, ShutdownTaskResponse.getDefaultInstance());
      } else {
        fail(response, Errors.error(Status.Code.INTERNAL, "Shutdown barrier has failed.\nBarrier result: '"
            + error.getStatus() + "'", task.id, false));
      }
    });
  }

  private void disconnect(Task task) {
    if (task.lifecycle.shutDown()) {
      log.info("{} shut down", task.describe());
    }
    if (task.poll != null) {
      fail(task.poll, Status.CANCELLED.withDescription("task " + task.id + " has shut down").asRuntimeException());
      task.poll = null;
    }
  }

  @Override
  public synchronized void resetTask(ResetTaskRequest request, StreamObserver<ResetTaskResponse> response) {
    Task task = lookup(request.getSourceTask());
    if (task == null) {
      fail(response, unknownTask(request.getSourceTask(), "asked for a reset"));
      return;
    }
    if (!task.lifecycle.reset()) {
      fail(response, Errors.error(Status.Code.FAILED_PRECONDITION, "Reset is only allowed for a task in error; "
          + task.describe() + " is " + task.lifecycle.state(), task.id, false));
      return;
    }
    task.undeliveredError = null;
    log.info("{} was reset and may register again", task.describe());
    reply(response, ResetTaskResponse.getDefaultInstance());
  }

  // ---- barriers -------------------------------------------------------------------------------

  @Override
  public synchronized void barrier(BarrierRequest request, StreamObserver<BarrierResponse> response) {
    String id = request.getBarrierId();
    Task source = lookup(request.getSourceTask());
    if (source == null) {
      fail(response, unknownTask(request.getSourceTask(), "called barrier " + id));
      return;
    }
    TreeSet<TaskId> participants = new TreeSet<>();
    for (CoordinatedTask p : request.getTasksList()) {
      TaskId t = Errors.fromProto(p);
      if (!tasks.containsKey(t)) {
        fail(response, Errors.barrierError(Status.Code.INVALID_ARGUMENT, "Barrier " + id + " names task "
            + t.fullName() + ", which is not coordinated by this service", id, request.getCounter()));
        return;
      }
      participants.add(t);
    }
    if (participants.isEmpty()) {
      participants.addAll(tasks.keySet());
    }
    if (!participants.contains(source.id)) {
      fail(response, Errors.barrierError(Status.Code.INVALID_ARGUMENT, "Task " + source.describe()
          + " is not a participant of barrier " + id + " " + participants, id, request.getCounter()));
      return;
    }
    long timeoutMs = request.getBarrierTimeoutInMs();
    if (timeoutMs <= 0) {
      fail(response, Errors.barrierError(Status.Code.INVALID_ARGUMENT, "Barrier " + id
          + " needs a positive timeout, was " + timeoutMs + " ms", id, request.getCounter()));
      return;
    }
    barriers.arrive(id, request.getCounter(), Duration.ofMillis(timeoutMs), participants, source.id, error -> {
      if (error == null) {
        reply(response, BarrierResponse.newBuilder().setCounter(request.getCounter()).build());
      } else {
        fail(response, error);
      }
    });
  }

  @Override
  public synchronized void cancelBarrier(CancelBarrierRequest request, StreamObserver<CancelBarrierResponse> response) {
    String id = request.getBarrierId();
    Task source = lookup(request.getSourceTask());
    if (source == null) {
      fail(response, unknownTask(request.getSourceTask(), "cancelled barrier " + id));
      return;
    }
    try {
      barriers.cancel(id, request.getCounter(), source.id, new TreeSet<>(tasks.keySet()));
    } catch (StatusRuntimeException e) {
      fail(response, e);
      return;
    }
    log.info("barrier {} cancelled by {}", id, source.describe());
    reply(response, CancelBarrierResponse.getDefaultInstance());
  }

  // ---- key-value store ------------------------------------------------------------------------

  @Override
  public void insertKeyValue(InsertKeyValueRequest request, StreamObserver<InsertKeyValueResponse> response) {
    try {
      store.insert(request.getKv().getKey(), request.getKv().getValue(), request.getAllowOverwrite());
      reply(response, InsertKeyValueResponse.getDefaultInstance());
    } catch (StatusRuntimeException e) {
      fail(response, e);
    }
  }

  @Override
  public void getKeyValue(GetKeyValueRequest request, StreamObserver<GetKeyValueResponse> response) {
    String key = request.getKey();
    synchronized (this) {
      if (closed) {
        fail(response, shuttingDown());
        return;
      }
      blockedGets.add(response);
    }
    Runnable withdraw = store.get(key, value -> {
      synchronized (this) {
        if (!blockedGets.remove(response)) {
          return;
        }
      }
      reply(response, GetKeyValueResponse.newBuilder()
          .setKv(KeyValueEntry.newBuilder().setKey(KeyValueStore.normalize(key)).setValue(value)).build());
    });
    onCancel(response, () -> {
      withdraw.run();
      synchronized (this) {
        blockedGets.remove(response);
      }
    });
  }

  @Override
  public void tryGetKeyValue(TryGetKeyValueRequest request, StreamObserver<TryGetKeyValueResponse> response) {
    String key = KeyValueStore.normalize(request.getKey());
    store.tryGet(key).ifPresentOrElse(
        value -> reply(response, TryGetKeyValueResponse.newBuilder()
            .setKv(KeyValueEntry.newBuilder().setKey(key).setValue(value)).build()),
        () -> fail(response, Status.NOT_FOUND.withDescription("Config key " + key + " not found.").asRuntimeException()));
  }

  @Override
  public void getKeyValueDir(GetKeyValueDirRequest request, StreamObserver<GetKeyValueDirResponse> response) {
    GetKeyValueDirResponse.Builder dir = GetKeyValueDirResponse.newBuilder().setDirectoryKey(request.getDirectoryKey());
    store.getDir(request.getDirectoryKey()).forEach((k, v) -> dir.addKv(KeyValueEntry.newBuilder().setKey(k).setValue(v)));
    reply(response, dir.build());
  }

  @Override
  public void deleteKeyValue(DeleteKeyValueRequest request, StreamObserver<DeleteKeyValueResponse> response) {
    store.delete(request.getKey());
    reply(response, DeleteKeyValueResponse.getDefaultInstance());
  }

  @Override
  public void incrementKeyValue(IncrementKeyValueRequest request, StreamObserver<IncrementKeyValueResponse> response) {
    try {
      long value = store.increment(request.getKey(), request.getIncrement());
      reply(response, IncrementKeyValueResponse.newBuilder().setKv(KeyValueEntry.newBuilder()
          .setKey(KeyValueStore.normalize(request.getKey()))
          .setValue(ByteString.copyFrom(java.nio.ByteBuffer.allocate(8).putLong(value).flip()))).build());
    } catch (StatusRuntimeException e) {
      fail(response, e);
    }
  }

  /**
   * Who is blocked here: {@code barrier c: worker 0; 1 GetKeyValue call waiting for its key}; empty
   * when no one is. Logged when the service closes on callers it then fails, and read by whoever
   * must know a caller waits before acting on it.
   */
  synchronized String waiting() {
    List<String> parts = new ArrayList<>(barriers.describeWaiting());
    if (!blockedGets.isEmpty()) {
      parts.add(blockedGets.size() + " GetKeyValue call" + (blockedGets.size() == 1 ? "" : "s")
          + " waiting for its key");
    }
    return String.join("; ", parts);
  }

  // ---- plumbing -------------------------------------------------------------------------------

  /** Fails every call still waiting here (polls, barriers, gets) so the server can stop promptly. */
  @Override
  public void close() {
    List<StreamObserver<?>> gets;
    synchronized (this) {
      if (closed) {
        return;
      }
      closed = true;
      String waiting = waiting();
      if (!waiting.isEmpty()) {
        log.info("the coordination service is shutting down; failing those still waiting: {}", waiting);
      }
      timer.shutdownNow();
      for (Task task : tasks.values()) {
        if (task.poll != null) {
          fail(task.poll, shuttingDown());
          task.poll = null;
        }
      }
      barriers.failAll(shuttingDown());
      String unregistered = tasks.values().stream().filter(t -> !t.lifecycle.connected())
          .map(Task::describe).collect(Collectors.joining(", "));
      StatusRuntimeException gaveUp = Errors.error(Status.Code.ABORTED, "the coordination service is shutting down "
          + "before every task registered; not registered: " + unregistered, null, false);
      waitingForAll.forEach(w -> fail(w, gaveUp));
      waitingForAll.clear();
      gets = new ArrayList<>(blockedGets);
      blockedGets.clear();
    }
    gets.forEach(g -> fail(g, shuttingDown()));
  }

  private static StatusRuntimeException shuttingDown() {
    return Errors.error(Status.Code.ABORTED, "the coordination service is shutting down", null, false);
  }

  private Task lookup(CoordinatedTask proto) {
    return tasks.get(Errors.fromProto(proto));
  }

  private StatusRuntimeException unknownTask(CoordinatedTask proto, String action) {
    return Errors.error(Status.Code.INVALID_ARGUMENT, "Unexpected task " + action + " with task_name=/job:"
        + proto.getJobName() + "/replica:0/task:" + proto.getTaskId() + "; this service coordinates "
        + tasks.keySet().stream().map(TaskId::fullName).collect(Collectors.joining(", ")), null, false);
  }

  private static <T> void reply(StreamObserver<T> observer, T value) {
    try {
      observer.onNext(value);
      observer.onCompleted();
    } catch (RuntimeException e) {
      log.debug("caller went away before its reply: {}", e.toString());
    }
  }

  private static void fail(StreamObserver<?> observer, StatusRuntimeException error) {
    try {
      observer.onError(error);
    } catch (RuntimeException e) {
      log.debug("caller went away before its error: {}", e.toString());
    }
  }

  private static void onCancel(StreamObserver<?> observer, Runnable action) {
    if (observer instanceof ServerCallStreamObserver<?> call) {
      call.setOnCancelHandler(action);
    }
  }
}
