package io.muster.strategy;

import io.grpc.StatusRuntimeException;
import io.muster.cluster.ClusterConfigException;
import io.muster.cluster.ClusterSpec;
import io.muster.cluster.Roles;
import io.muster.cluster.TaskId;
import io.muster.cluster.TaskType;
import io.muster.cluster.TfConfig;
import io.muster.coordination.CoordinationException;
import io.muster.coordination.CoordinationOptions;
import io.muster.internal.coordination.TaskRuntime;
import io.muster.coordinator.ClusterCoordinator;
import io.muster.coordinator.ClosureWorkerService;
import io.muster.coordinator.Functions;
import io.muster.ps.ParameterServerService;
import io.muster.ps.ParameterServers;
import io.muster.internal.rpc.ChannelCache;
import io.muster.rpc.DeadlineExceededException;
import io.muster.rpc.Security;
import java.time.Duration;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Asynchronous parameter-server training, the Java counterpart of
 * {@code tf.distribute.experimental.ParameterServerStrategy} with a {@code ClusterCoordinator}: the
 * chief creates variables on the ps tasks and schedules registered functions on the workers; the ps
 * tasks and the workers only serve.
 *
 * <p>{@link Builder#join()} starts the task's server with its service (variables on a ps, the
 * function runner on a worker), joins the coordination service (waiting for every task, with a
 * deadline) and, on the chief, starts the {@link #coordinator()}. A worker or ps then calls
 * {@link #serve()}, which returns when the chief closes the strategy. Workers are recoverable: one
 * that dies may be started again with the same {@code TF_CONFIG} and rejoins the running job; a ps
 * or the chief that dies ends the job.
 */
public final class ParameterServerStrategy implements AutoCloseable {

  private static final Logger log = LoggerFactory.getLogger(ParameterServerStrategy.class);
  /** The chief sets this key in the coordination service's store when the job is done. */
  static final String FINISHED_KEY = "muster/ps/finished";
  private static final Duration SERVE_POLL = Duration.ofSeconds(1);

  private final TaskRuntime runtime;
  private final ChannelCache channels;
  private final ParameterServers variables;
  private final ClusterCoordinator coordinator;
  private final CompletableFuture<CoordinationException> failure;

  private ParameterServerStrategy(TaskRuntime runtime, ChannelCache channels, ParameterServers variables,
      ClusterCoordinator coordinator, CompletableFuture<CoordinationException> failure) {
    this.runtime = runtime;
    this.channels = channels;
    this.variables = variables;
    this.coordinator = coordinator;
    this.failure = failure;
  }

  public static Builder builder() {
    return new Builder();
  }

  public TaskId taskId() {
    return runtime.task();
  }

  public ClusterSpec cluster() {
    return runtime.cluster();
  }

  /** The job's variables as this task reaches them (any task may read and update them; the chief creates them). */
  public ParameterServers variables() {
    return variables;
  }

  /** Whether this task is the coordinator (the chief). */
  public boolean isCoordinator() {
    return coordinator != null;
  }

  /**
   * The chief's coordinator.
   *
   * @throws IllegalStateException on a worker or ps, which serve instead
   */
  public ClusterCoordinator coordinator() {
    if (coordinator == null) {
      throw new IllegalStateException(taskId() + " is not the coordinator; only the chief schedules (call serve())");
    }
    return coordinator;
  }

  /**
   * On a worker or ps: serves until the chief closes its strategy.
   *
   * @throws CoordinationException when the job failed meanwhile (the chief or a ps was lost)
   * @throws IllegalStateException on the chief
   */
  public void serve() {
    if (coordinator != null) {
      throw new IllegalStateException("the chief coordinates; serve() is for workers and ps tasks");
    }
    while (true) {
      if (failure.isDone()) {
        throw failure.join();
      }
      try {
        String reason = new String(runtime.agent().get(FINISHED_KEY, SERVE_POLL), java.nio.charset.StandardCharsets.UTF_8);
        log.info("{}: the coordinator finished the job ({})", taskId(), reason);
        return;
      } catch (DeadlineExceededException e) {
        // Not finished yet: look at the failure flag again and wait on.
      } catch (CoordinationException e) {
        throw failure.isDone() ? failure.join() : e;
      }
    }
  }

  /**
   * On the chief: stops the coordinator and tells every task that the job is done (their
   * {@link #serve()} returns). Then leaves the coordination service and stops the task's server.
   */
  @Override
  public void close() {
    try {
      if (coordinator != null) {
        coordinator.close();
        if (!failure.isDone()) {
          runtime.agent().insert(FINISHED_KEY, "done".getBytes(java.nio.charset.StandardCharsets.UTF_8), true);
        }
      }
      leave();
    } catch (CoordinationException e) {
      log.warn("{}: could not tell the other tasks that the job is done: {}", taskId(), e.getMessage());
    } finally {
      runtime.close();
      channels.close();
    }
  }

  private void leave() {
    if (failure.isDone()) {
      return;
    }
    try {
      runtime.agent().shutdown();
    } catch (CoordinationException | StatusRuntimeException e) {
      log.debug("{}: leaving the coordination service: {}", taskId(), e.getMessage());
    }
  }

  /** Options with defaults that suit most jobs; {@link #join()} checks them and the cluster. */
  public static final class Builder extends StrategyBuilder<Builder> {
    private Functions functions = Functions.builder().build();
    private ClusterCoordinator.Options coordinatorOptions = ClusterCoordinator.Options.DEFAULTS;
    private Duration psTimeout = Duration.ofMinutes(1);

    private Builder() {
      super(CoordinationOptions.DEFAULTS);
    }

    /** The functions and resource factories of the job: register the same ones on every task. */
    public Builder functions(Functions value) {
      this.functions = value;
      return this;
    }

    public Builder coordinator(ClusterCoordinator.Options value) {
      this.coordinatorOptions = value;
      return this;
    }

    /** The deadline of each call to a ps (one read or update of one shard); one minute by default. */
    public Builder psTimeout(Duration value) {
      if (value == null || value.isZero() || value.isNegative()) {
        throw new IllegalArgumentException("psTimeout must be > 0, was " + value);
      }
      this.psTimeout = value;
      return this;
    }

    /**
     * Starts this task's server and service, joins every task, and on the chief starts the
     * coordinator: blocks until every task of the cluster has joined, or the coordination options'
     * join timeout (5 minutes by default) has passed, naming the tasks missing.
     *
     * @throws ClusterConfigException naming what is wrong with the cluster or this task
     * @throws IllegalArgumentException naming an option set to null
     */
    public ParameterServerStrategy join() {
      requireSet(functions, "functions");
      checkCommon();
      requireSet(coordinatorOptions, "coordinator");
      TfConfig tfConfig = tfConfig();
      ClusterSpec cluster = tfConfig.cluster();
      if (cluster.isEmpty()) {
        throw new ClusterConfigException("ParameterServerStrategy needs a cluster: TF_CONFIG has no \"cluster\"");
      }
      TaskId task = tfConfig.requireTask();
      Roles.validate(cluster, task.job(), task.index());
      for (String job : cluster.jobs()) {
        if (!Set.of("chief", "worker", "ps").contains(job)) {
          throw new ClusterConfigException("ParameterServerStrategy runs chief, worker and ps tasks; the cluster "
              + "also has job '" + job + "' (an evaluator runs on its own, outside the cluster)");
        }
      }
      if (cluster.numTasks(TaskType.PS) == 0) {
        throw new ClusterConfigException("There must be at least one ps.");
      }
      if (cluster.numTasks(TaskType.WORKER) == 0) {
        throw new ClusterConfigException("There must be at least one worker.");
      }
      if (cluster.numTasks(TaskType.CHIEF) != 1) {
        throw new ClusterConfigException("ParameterServerStrategy needs one chief task to run the coordinator; the "
            + "cluster has " + cluster.numTasks(TaskType.CHIEF));
      }
      Security sec = security();
      CoordinationOptions coordination = coordination();
      CompletableFuture<CoordinationException> failure = new CompletableFuture<>();
      java.util.concurrent.atomic.AtomicReference<ClusterCoordinator> coordinatorRef =
          new java.util.concurrent.atomic.AtomicReference<>();
      TaskRuntime.Builder runtimeBuilder = runtime(tfConfig, sec)
          .recoverableJobs(Set.of(TaskType.WORKER.jobName()))
          .onError(e -> {
            failure.complete(e);
            ClusterCoordinator c = coordinatorRef.get();
            if (c != null) {
              c.coordinationError(e);
            }
          });
      TaskRuntime runtime = runtimeBuilder.start();
      // The variables' and the closures' calls only hand results to waiting threads: no pool hop.
      ChannelCache channels = ChannelCache.withDirectCallbacks(sec);
      try {
        ParameterServers variables = new ParameterServers(cluster, channels::get, runtime.agent(), psTimeout);
        if (task.is(TaskType.PS)) {
          runtime.server().addService(new ParameterServerService(task.toString()),
              ParameterServerService.NON_BLOCKING_METHODS);
        } else if (task.is(TaskType.WORKER)) {
          runtime.server().addService(new ClosureWorkerService(task, functions, variables,
              runtime.agent()::incarnation), Set.of("Ping"));
        }
        runtime.join();
        ClusterCoordinator coordinator = null;
        if (task.is(TaskType.CHIEF)) {
          coordinator = ClusterCoordinator.start(cluster, runtime.agent()::taskStates, channels::get, functions,
              variables, coordinatorOptions, coordination.heartbeatTimeout());
          coordinatorRef.set(coordinator);
          if (failure.isDone()) {
            coordinator.coordinationError(failure.join());
          }
        }
        log.info("{}: ParameterServerStrategy ready ({} ps, {} workers){}", task, cluster.numTasks(TaskType.PS),
            cluster.numTasks(TaskType.WORKER), coordinator != null ? ", coordinating" : ", serving");
        return new ParameterServerStrategy(runtime, channels, variables, coordinator, failure);
      } catch (RuntimeException e) {
        runtime.close();
        channels.close();
        throw e;
      }
    }
  }
}
