package io.muster.coordinator;

import io.grpc.Channel;
import io.muster.cluster.ClusterSpec;
import io.muster.cluster.HostPort;
import io.muster.cluster.TaskId;
import io.muster.cluster.TaskType;
import io.muster.coordination.CoordinationException;
import io.muster.coordination.TaskState;
import io.muster.coordination.TaskStatus;
import io.muster.ps.ParameterServerUnavailableException;
import io.muster.ps.ParameterServers;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.Function;
import java.util.function.Supplier;
import java.util.stream.Collectors;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Schedules functions on the workers of a parameter-server job, the Java counterpart of
 * {@code tf.distribute.coordinator.ClusterCoordinator}, run by the chief.
 *
 * <p>{@link #schedule} queues a call of a registered function and returns its {@link RemoteValue}
 * at once; one thread per worker takes the next queued closure whenever its worker is free, so fast
 * workers do more. The queue holds at most {@link Options#queueSize()} closures (TensorFlow's
 * 256 Ki by default); {@code schedule} blocks while it is full.
 *
 * <p>Start it with {@link io.muster.strategy.ParameterServerStrategy}, which also creates the
 * ps tasks' variables service and the workers' function runner.
 *
 * <p><b>At least once.</b> A worker that fails (its call breaks, or the coordination service
 * declares it failed) has its closure put back and run by the next free worker, so a function runs
 * at least once per scheduling, and more than once when a worker died after starting it: at most
 * once more per worker failure while it was in flight. The failed worker's thread waits (up to
 * {@link Options#workerRecoveryTimeout()}, an hour by default) for the worker to register again,
 * creates its per-worker resources again, and goes on.
 *
 * <p><b>Errors.</b> The first error a function throws is raised, once, by the next
 * {@link #schedule}, {@link #join} or {@link #done} (after the closures in flight have finished),
 * and every queued closure is cancelled ({@link ClosureCancelledException}). A parameter server
 * that fails is fatal: its variables are gone, so every later call raises
 * {@link ParameterServerUnavailableException} naming it, within the heartbeat timeout plus one poll,
 * and the job must restart from its last checkpoint.
 */
public final class ClusterCoordinator implements AutoCloseable {

  private static final Logger log = LoggerFactory.getLogger(ClusterCoordinator.class);

  /**
   * @param queueSize the most closures queued at once (0 for no limit)
   * @param workerRecoveryTimeout how long a failed worker is waited for before it is given up
   * @param pollInterval how often the coordination service is asked for every task's state
   */
  public record Options(int queueSize, Duration workerRecoveryTimeout, Duration pollInterval)
      implements java.io.Serializable {
    public static final Options DEFAULTS = new Options(256 * 1024, Duration.ofHours(1), Duration.ofSeconds(1));

    public Options {
      if (queueSize < 0) {
        throw new IllegalArgumentException("queueSize must be >= 0 (0: no limit), was " + queueSize);
      }
      if (workerRecoveryTimeout == null || workerRecoveryTimeout.isNegative() || workerRecoveryTimeout.isZero()) {
        throw new IllegalArgumentException("workerRecoveryTimeout must be > 0, was " + workerRecoveryTimeout);
      }
      if (pollInterval == null || pollInterval.isNegative() || pollInterval.isZero()) {
        throw new IllegalArgumentException("pollInterval must be > 0, was " + pollInterval);
      }
    }

    public Options withQueueSize(int value) {
      return new Options(value, workerRecoveryTimeout, pollInterval);
    }

    public Options withWorkerRecoveryTimeout(Duration value) {
      return new Options(queueSize, value, pollInterval);
    }

    public Options withPollInterval(Duration value) {
      return new Options(queueSize, workerRecoveryTimeout, value);
    }
  }

  private final ClusterSpec cluster;
  private final Supplier<List<TaskStatus>> taskStates;
  private final Functions functions;
  private final Options options;
  private final Duration heartbeatTimeout;
  private final ParameterServers variables;
  private final ClosureQueue queue;
  private final List<RemoteWorker> workers = new ArrayList<>();
  private final List<Thread> threads = new ArrayList<>();
  private final Thread watch;
  private final Map<TaskId, TaskStatus> states = new ConcurrentHashMap<>();
  private final List<PerWorkerResource> resources = new CopyOnWriteArrayList<>();
  private final Map<TaskId, java.util.concurrent.atomic.AtomicInteger> psTrouble = new ConcurrentHashMap<>();
  private final AtomicLong closureIds = new AtomicLong();
  private final AtomicLong resourceIds = new AtomicLong();
  private volatile boolean closed;

  private record PerWorkerResource(long id, String function, List<Value> args, List<RemoteValue> created) {}

  /**
   * Starts a coordinator on the chief's joined runtime: one thread per worker, and a watch on the
   * coordination service's account of every task. {@link io.muster.strategy.ParameterServerStrategy} does this, and
   * passes the task's coordination errors to {@link #coordinationError}.
   *
   * @param taskStates the coordination service's account of every task (the chief's agent gives it)
   * @param channels a channel to a worker by its address (the caller's, closed by the caller)
   * @param heartbeatTimeout the coordination service's, which bounds how long a lost ps goes unnoticed
   */
  public static ClusterCoordinator start(ClusterSpec cluster, Supplier<List<TaskStatus>> taskStates,
      Function<HostPort, Channel> channels, Functions functions, ParameterServers variables, Options options,
      Duration heartbeatTimeout) {
    return new ClusterCoordinator(cluster, taskStates, channels, functions, variables, options, heartbeatTimeout);
  }

  private ClusterCoordinator(ClusterSpec cluster, Supplier<List<TaskStatus>> taskStates,
      Function<HostPort, Channel> channels, Functions functions, ParameterServers variables, Options options,
      Duration heartbeatTimeout) {
    this.cluster = cluster;
    this.taskStates = taskStates;
    this.functions = functions;
    this.options = options;
    this.heartbeatTimeout = heartbeatTimeout;
    this.variables = variables;
    List<TaskId> workerTasks = cluster.allTasks().stream().filter(t -> t.is(TaskType.WORKER)).toList();
    if (workerTasks.isEmpty()) {
      throw new IllegalArgumentException("There must be at least one worker.");
    }
    this.queue = new ClosureQueue(options.queueSize(), workerTasks.size());
    pollStates();
    for (int i = 0; i < workerTasks.size(); i++) {
      TaskId task = workerTasks.get(i);
      HostPort address = HostPort.parse(cluster.taskAddress(task));
      long incarnation = Optional.ofNullable(states.get(task)).map(TaskStatus::incarnation).orElse(0L);
      RemoteWorker worker = new RemoteWorker(i, task, address, channels.apply(address), this, queue, incarnation);
      workers.add(worker);
      Thread thread = new Thread(worker, "muster-coordinator-" + task.job() + "-" + task.index());
      thread.setDaemon(true);
      threads.add(thread);
    }
    this.watch = new Thread(this::watchStates, "muster-coordinator-watch");
    watch.setDaemon(true);
    threads.forEach(Thread::start);
    watch.start();
  }

  /** The job's variables, to create them (before scheduling the functions that use them). */
  public ParameterServers variables() {
    return variables;
  }

  /** The worker tasks, in the order of {@link PerWorkerValues#values()}. */
  public List<TaskId> workers() {
    return workers.stream().map(RemoteWorker::task).toList();
  }

  /**
   * Queues a call of the registered function with these arguments ({@link Value}s, or
   * {@link PerWorkerValues} for the resource of whichever worker runs it), blocking while the
   * queue is full.
   *
   * @throws IllegalArgumentException for an unknown function or an argument of another type (a
   *     {@link RemoteValue} cannot be an argument: fetch it first)
   * @throws RemoteFunctionException the first error of an earlier closure, once
   * @throws ParameterServerUnavailableException when a ps was lost
   */
  public RemoteValue schedule(String function, Object... args) {
    if (functions.function(function).isEmpty()) {
      throw new IllegalArgumentException("no function " + function + " is registered (registered: "
          + functions.functionNames() + ")");
    }
    for (Object arg : args) {
      if (arg instanceof RemoteValue) {
        throw new IllegalArgumentException("a RemoteValue cannot be passed as an argument to " + function
            + "; fetch() it and pass the Value");
      }
      if (!(arg instanceof Value) && !(arg instanceof PerWorkerValues)) {
        throw new IllegalArgumentException("arguments of " + function + " must be Value or PerWorkerValues, got "
            + (arg == null ? "null" : arg.getClass().getName()));
      }
    }
    RemoteValue output = new RemoteValue();
    try {
      queue.put(new Closure(closureIds.incrementAndGet(), function, List.of(args), output));
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new IllegalStateException("interrupted while scheduling " + function, e);
    }
    return output;
  }

  /**
   * Creates a resource on every worker with the registered resource function, before the worker
   * runs anything scheduled after this call; a worker that comes back after a failure creates it
   * again.
   */
  public PerWorkerValues createPerWorkerResource(String function, Value... args) {
    if (functions.resource(function).isEmpty()) {
      throw new IllegalArgumentException("no resource function " + function + " is registered (registered: "
          + functions.resourceNames() + ")");
    }
    long id = resourceIds.incrementAndGet();
    List<RemoteValue> created = new ArrayList<>();
    for (int i = 0; i < workers.size(); i++) {
      created.add(new RemoteValue());
    }
    PerWorkerResource resource = new PerWorkerResource(id, function, List.of(args), created);
    resources.add(resource);
    for (int i = 0; i < workers.size(); i++) {
      queue.putResourceTask(i, new ResourceTask(id, function, resource.args(), created.get(i)));
    }
    return new PerWorkerValues(id, created);
  }

  /**
   * Waits until every scheduled closure has completed.
   *
   * @throws RemoteFunctionException the first error of a closure since the last one raised
   * @throws ParameterServerUnavailableException when a ps was lost
   */
  public void join() {
    try {
      queue.awaitIdle();
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new IllegalStateException("interrupted while joining the scheduled closures", e);
    }
  }

  /** Whether every scheduled closure has completed; raises as {@link #join} does. */
  public boolean done() {
    try {
      return queue.done();
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new IllegalStateException("interrupted", e);
    }
  }

  /** Stops the worker threads; queued closures are cancelled. The strategy tells the tasks the job is done. */
  @Override
  public void close() {
    if (closed) {
      return;
    }
    closed = true;
    queue.close(new IllegalStateException("the cluster coordinator was closed"));
    watch.interrupt();
    for (Thread thread : threads) {
      thread.interrupt();
    }
    for (Thread thread : threads) {
      try {
        thread.join(5000);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        return;
      }
    }
  }

  // ---- what the worker threads and the strategy use ---------------------------------------

  Duration pollInterval() {
    return options.pollInterval();
  }

  Duration recoveryTimeout() {
    return options.workerRecoveryTimeout();
  }

  boolean isClosed() {
    return closed;
  }

  /** The coordination service's latest account of a task. */
  Optional<TaskStatus> state(TaskId task) {
    return Optional.ofNullable(states.get(task));
  }

  List<ResourceTask> resourceTasksFor(int worker) {
    return resources.stream().map(r -> new ResourceTask(r.id(), r.function(), r.args(), r.created().get(worker)))
        .toList();
  }

  void workerLost(TaskId task) {
    if (workers.stream().allMatch(RemoteWorker::lost)) {
      queue.fatal(new IllegalStateException("every worker failed and none came back within "
          + options.workerRecoveryTimeout() + ": " + workers().stream().map(TaskId::toString)
          .collect(Collectors.joining(", "))));
    }
  }

  /**
   * An error the coordination service reported to this task: a failed ps (or the leader, ps 0)
   * or chief is fatal for the job. Workers' failures do not arrive here (they are recoverable).
   */
  public void coordinationError(CoordinationException error) {
    Optional<TaskId> source = error.sourceTask();
    if (source.isPresent() && source.get().is(TaskType.PS)) {
      psLost(source.get(), error.getMessage(), error);
    } else if (!closed) {
      queue.fatal(error);
    }
  }

  /** How often a ps may fail to answer while the coordination service counts it alive (TensorFlow's default). */
  static final int TRANSIENT_PS_FAILURES = 3;

  /**
   * A function reported that a ps did not answer: the coordination service decides, within a
   * heartbeat timeout, whether the ps failed (fatal) or the trouble passed (the closure runs again,
   * up to {@link #TRANSIENT_PS_FAILURES} times per ps).
   */
  void parameterServerTrouble(TaskId ps, String error) {
    long deadline = System.nanoTime() + heartbeatTimeout.plus(options.pollInterval().multipliedBy(2)).toNanos();
    while (System.nanoTime() < deadline && !queue.isFatal() && !closed) {
      TaskStatus status = states.get(ps);
      if (status != null && status.state() == TaskState.ERROR) {
        psLost(ps, status.error().orElse(error), null);
        return;
      }
      try {
        Thread.sleep(options.pollInterval().toMillis());
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        return;
      }
    }
    if (queue.isFatal() || closed) {
      return;
    }
    int times = psTrouble.computeIfAbsent(ps, p -> new java.util.concurrent.atomic.AtomicInteger()).incrementAndGet();
    if (times > TRANSIENT_PS_FAILURES) {
      psLost(ps, "it did not answer " + times + " times, though the coordination service counts it alive; last: " + error,
          null);
    } else {
      log.warn("{} did not answer a worker ({}), but the coordination service still counts it alive; retrying", ps,
          error);
    }
  }

  private void psLost(TaskId ps, String why, Throwable cause) {
    queue.fatal(new ParameterServerUnavailableException(ps, "parameter server " + ps + " at " + cluster.taskAddress(ps)
        + " failed: " + why + "; its variables are lost, so the job must restart from its last checkpoint", cause));
  }

  private void watchStates() {
    long lastOk = System.nanoTime();
    while (!closed && !queue.isFatal()) {
      try {
        Thread.sleep(options.pollInterval().toMillis());
        pollStates();
        lastOk = System.nanoTime();
        states.values().stream().filter(s -> s.task().is(TaskType.PS) && s.state() == TaskState.ERROR).findFirst()
            .ifPresent(s -> psLost(s.task(), s.error().orElse("in error"), null));
      } catch (InterruptedException e) {
        return;
      } catch (CoordinationException e) {
        if (System.nanoTime() - lastOk > heartbeatTimeout.toNanos() && !closed) {
          coordinationError(new CoordinationException(e.code(), "the coordination service (on "
              + io.muster.cluster.Roles.coordinationLeader(cluster) + ") has not answered for " + heartbeatTimeout
              + ": " + e.getMessage(), io.muster.cluster.Roles.coordinationLeaderTask(cluster).orElse(null), e));
        }
      }
    }
  }

  private void pollStates() {
    for (TaskStatus status : taskStates.get()) {
      states.put(status.task(), status);
    }
  }

  @Override
  public String toString() {
    return "ClusterCoordinator" + Arrays.toString(workers().toArray());
  }
}
