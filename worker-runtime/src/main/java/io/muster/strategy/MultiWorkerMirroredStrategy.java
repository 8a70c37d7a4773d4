package io.muster.strategy;

import io.grpc.Context;
import io.muster.cluster.ClusterConfigException;
import io.muster.cluster.ClusterSpec;
import io.muster.cluster.HostPort;
import io.muster.cluster.Roles;
import io.muster.cluster.TaskId;
import io.muster.cluster.TaskType;
import io.muster.cluster.TfConfig;
import io.muster.collective.CollectiveGroup;
import io.muster.collective.Collectives;
import io.muster.collective.CommunicationOptions;
import io.muster.collective.DataType;
import io.muster.collective.ReduceOp;
import io.muster.coordination.CoordinationOptions;
import io.muster.internal.coordination.TaskRuntime;
import io.muster.rpc.Security;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicReference;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Synchronous data-parallel training across the chief and workers of a job, the Java counterpart
 * of {@code tf.distribute.MultiWorkerMirroredStrategy} with one replica per task.
 *
 * <p>{@link Builder#join()} starts the task's server, joins the coordination service (waiting
 * for every task, with a deadline) and sets up the collective ring. Replicas start identical by
 * {@link #broadcastFromChief}; gradients are averaged with {@link #allReduce} (MEAN by default,
 * many small arrays packed into few buffers of about {@code bytesPerPack}). When the coordination
 * service declares a task failed, collectives in flight and later fail with that error instead of
 * waiting; when this task's collectives see a failure first (a peer's stream broke because it died),
 * the task reports it to the service at once, which tells every other task. A preemption notice
 * (a signal, a launcher's word) makes every replica save after one agreed step ({@link #preemption()}).
 * {@link #close()} leaves
 * through a shutdown barrier, so a task that finishes early waits for the others instead of tearing
 * the ring down under them; after a failure it leaves at once instead, without waiting there for a
 * task that is dead.
 */
public final class MultiWorkerMirroredStrategy implements AutoCloseable {

  private static final Logger log = LoggerFactory.getLogger(MultiWorkerMirroredStrategy.class);

  private final TaskRuntime runtime;
  private final Collectives collectives;
  private final ClusterSpec cluster;
  private final TaskId task;
  private final CommunicationOptions communication;
  private final Duration barrierTimeout;
  private final Preemption preemption;
  private ByteBuffer pack = ByteBuffer.allocateDirect(0);
  private volatile boolean aborted;

  private MultiWorkerMirroredStrategy(TaskRuntime runtime, Collectives collectives, CommunicationOptions communication,
      Duration barrierTimeout, Preemption preemption) {
    this.runtime = runtime;
    this.collectives = collectives;
    this.cluster = runtime.cluster();
    this.task = runtime.task();
    this.communication = communication;
    this.barrierTimeout = barrierTimeout;
    this.preemption = preemption;
  }

  /**
   * The coordination options a synchronous job starts with, wherever it is launched: the service's
   * defaults and a one-minute shutdown barrier, so that no task tears down its server while the
   * others still reduce with it.
   */
  public static final CoordinationOptions DEFAULT_COORDINATION = CoordinationOptions.DEFAULTS
      .withShutdownBarrierTimeout(Duration.ofMinutes(1));

  /** A builder reading {@code TF_CONFIG} and {@code MUSTER_JOB_TOKEN} from the environment unless told otherwise. */
  public static Builder builder() {
    return new Builder();
  }

  public TaskId taskId() {
    return task;
  }

  public ClusterSpec cluster() {
    return cluster;
  }

  /** Chief plus workers: one replica each. */
  public int numReplicasInSync() {
    return collectives.size();
  }

  /** The chief, or worker 0 when there is no chief: the task that writes checkpoints and summaries. */
  public boolean isChief() {
    return Roles.isChief(cluster, task);
  }

  /** This task's input shard: its {@code id_in_cluster}. */
  public int inputPipelineId() {
    return collectives.rank();
  }

  public int numInputPipelines() {
    return collectives.size();
  }

  public Collectives collectives() {
    return collectives;
  }

  /** The address this task's server is bound to: its {@code TF_CONFIG} address, with the port it got where that was 0. */
  public HostPort address() {
    return runtime.server().address();
  }

  /**
   * The gang's preemption notice and the step its replicas agree to save at ({@link Preemption}):
   * a loop that calls {@code preemption().saveAfter(steps)} after every step (or hands this to
   * {@code BackupAndRestore}) saves and leaves when the cluster is about to take a container.
   */
  public Preemption preemption() {
    return preemption;
  }

  /** Makes every replica's variables equal to the chief's (rank 0), packed into one transfer. */
  public void broadcastFromChief(List<float[]> variables) {
    ByteBuffer buffer = packBuffer(variables);
    collectives.broadcast(buffer, 0);
    unpack(buffer, variables);
  }

  /** All-reduces the arrays with MEAN, in place: gradients summed over replicas, divided by their number. */
  public void allReduce(List<float[]> values) {
    allReduce(values, ReduceOp.MEAN);
  }

  /**
   * All-reduces the arrays in place, packed into buffers of about {@code bytesPerPack} (a pack is
   * closed once it exceeds that size; 0 puts everything in one pack), one collective per pack.
   */
  public void allReduce(List<float[]> values, ReduceOp op) {
    long limit = communication.bytesPerPack();
    List<float[]> current = new ArrayList<>();
    long bytes = 0;
    for (float[] value : values) {
      current.add(value);
      bytes += 4L * value.length;
      if (limit > 0 && bytes > limit) {
        reducePack(current, op);
        current.clear();
        bytes = 0;
      }
    }
    if (!current.isEmpty()) {
      reducePack(current, op);
    }
  }

  private void reducePack(List<float[]> values, ReduceOp op) {
    ByteBuffer buffer = packBuffer(values);
    collectives.allReduce(buffer, DataType.FLOAT32, op);
    unpack(buffer, values);
  }

  private ByteBuffer packBuffer(List<float[]> values) {
    long total = 0;
    for (float[] v : values) {
      total += 4L * v.length;
    }
    if (total > Integer.MAX_VALUE) {
      throw new IllegalArgumentException("a pack of " + total + " bytes exceeds 2 GiB; set bytesPerPack");
    }
    if (pack.capacity() < total) {
      pack = ByteBuffer.allocateDirect((int) total).order(ByteOrder.LITTLE_ENDIAN);
    }
    ByteBuffer buffer = pack.clear().limit((int) total).order(ByteOrder.LITTLE_ENDIAN);
    var floats = buffer.asFloatBuffer();
    values.forEach(floats::put);
    return buffer;
  }

  private static void unpack(ByteBuffer buffer, List<float[]> values) {
    var floats = buffer.asFloatBuffer();
    values.forEach(floats::get);
  }

  /** Waits until every replica reaches the barrier with this id (reusable), for up to the coordination join timeout. */
  public void barrier(String id) {
    runtime.agent().barrier(id, barrierTimeout, List.of());
  }

  /**
   * This task has failed: tells the coordination service (which tells every other task at once,
   * failing their collectives) unless its agent is no longer connected to it, and fails this task's
   * collectives; {@link #close()} then leaves without waiting at the shutdown barrier.
   */
  public void abort(String reason) {
    aborted = true;
    collectives.abort(reason);
    if (runtime.agent().state() != io.muster.coordination.TaskState.CONNECTED) {
      return; // the service told this task of the failure, or stopped answering it: nothing to tell it
    }
    try {
      runtime.agent().reportError(io.grpc.Status.Code.INTERNAL, reason);
    } catch (RuntimeException e) {
      log.warn("{}: could not report the failure to the coordination service: {}", task, e.getMessage());
    }
  }

  /**
   * A failure this task's collectives saw first (a neighbour's stream broke, a peer out of step, no
   * data for the timeout): reported now, so the service fails every other task's collectives and
   * barriers at once instead of waiting for a dead task's heartbeats to stop.
   */
  private void collectivesFailed(String reason, java.util.Optional<TaskId> brokenPeer) {
    if (aborted || runtime.agent().state() != io.muster.coordination.TaskState.CONNECTED) {
      return;
    }
    try {
      runtime.agent().reportError(brokenPeer.isPresent() ? io.grpc.Status.Code.UNAVAILABLE : io.grpc.Status.Code.INTERNAL,
          task + ": collectives failed: " + reason);
    } catch (RuntimeException e) {
      log.warn("{}: could not report the collectives' failure to the coordination service: {}", task, e.getMessage());
    }
  }

  /**
   * Waits at the shutdown barrier for every other task, then stops the collectives, agent and
   * server. After a failure (this task aborted, its collectives failed, or the coordination service
   * reported an error) it skips the barrier: a task known to be dead would never reach it.
   */
  @Override
  public void close() {
    preemption.close();
    try {
      if (!aborted && !collectives.failed() && runtime.agent().state() == io.muster.coordination.TaskState.CONNECTED) {
        runtime.agent().shutdown();
      }
    } finally {
      collectives.close();
      runtime.close();
    }
  }

  /** Options with defaults that suit most jobs; {@link #join()} checks them and the cluster. */
  public static final class Builder extends StrategyBuilder<Builder> {
    private CommunicationOptions communication = CommunicationOptions.DEFAULTS;
    private String preemptionSignal;

    private Builder() {
      super(DEFAULT_COORDINATION);
    }

    public Builder communication(CommunicationOptions value) {
      this.communication = value;
      return this;
    }

    /**
     * Makes the signal {@code name} (say {@code "TERM"}, what Kubernetes, YARN and a shell send
     * before they kill) a {@link Preemption} notice instead of the JVM's exit, from {@link #join()}
     * until {@link #close()}. For a task in a JVM of its own; a launcher's JVM (Spark's executor)
     * keeps its own handlers and delivers the notice itself.
     */
    public Builder preemptionSignal(String name) {
      this.preemptionSignal = name;
      return this;
    }

    /**
     * Starts the server, joins every task and sets up the ring: blocks until every task of the
     * cluster has joined, or the coordination options' join timeout (5 minutes by default) has
     * passed, naming the tasks missing.
     *
     * @throws ClusterConfigException naming what is wrong with the cluster or this task
     * @throws IllegalArgumentException naming an option set to null
     */
    public MultiWorkerMirroredStrategy join() {
      requireSet(communication, "communication");
      checkCommon();
      TfConfig tfConfig = tfConfig();
      Security sec = security();
      CoordinationOptions coordination = coordination();
      ClusterSpec cluster = tfConfig.cluster();
      if (cluster.isEmpty()) {
        throw new ClusterConfigException("MultiWorkerMirroredStrategy needs a cluster: TF_CONFIG has no \"cluster\"");
      }
      TaskId task = tfConfig.requireTask();
      Roles.validate(cluster, task.job(), task.index());
      if (cluster.numTasks(TaskType.CHIEF) + cluster.numTasks(TaskType.WORKER) == 0) {
        throw new ClusterConfigException("No `worker`, `chief` or `evaluator` tasks can be found in `cluster_spec`.");
      }
      if (!task.is(TaskType.CHIEF) && !task.is(TaskType.WORKER)) {
        throw new ClusterConfigException("MultiWorkerMirroredStrategy runs on chief and worker tasks; this task is "
            + task + " (a ps or evaluator runs its own server instead)");
      }
      // past the heartbeat timeout: a silent peer is the coordination service's to name (it knows which
      // task stopped), not a watchdog's that sees only its own neighbour's stream stall
      Duration collectiveTimeout = communication.timeout().orElse(coordination.heartbeatTimeout().plusSeconds(2));
      TaskRuntime.Builder runtimeBuilder = runtime(tfConfig, sec);
      // A task failure reported by the coordination service aborts the ring, even one reported
      // while the ring is still being set up.
      AtomicReference<Collectives> ring = new AtomicReference<>();
      AtomicReference<Exception> failure = new AtomicReference<>();
      runtimeBuilder.onError(e -> {
        failure.compareAndSet(null, e);
        Collectives c = ring.get();
        if (c != null) {
          c.abort(e.getMessage(), e);
        }
      });
      Preemption preemption = new Preemption(task);
      // a notice while the gang forms cancels the join and the ring's setup: nothing is trained yet to save
      Context.CancellableContext forming = Context.current().withCancellation();
      preemption.whileForming(forming);
      TaskRuntime runtime = null;
      Collectives collectives = null;
      try {
        if (preemptionSignal != null) {
          preemption.noticeOnSignal(preemptionSignal);
        }
        Context outside = forming.attach();
        try {
          runtime = runtimeBuilder.start();
          runtime.join();
          CollectiveGroup replicas = CollectiveGroup.of(cluster, task);
          preemption.start(runtime.agent(), replicas.members(), coordination.joinTimeout());
          collectives = Collectives.create(replicas, "mwms",
              HostPort.parse(cluster.taskAddress(task)).host(), runtime.agent(), sec, communication,
              collectiveTimeout);
        } finally {
          forming.detach(outside);
        }
        preemption.formed();
        ring.set(collectives);
        if (failure.get() != null) {
          collectives.abort(failure.get().getMessage(), failure.get());
        }
        log.info("{}: MultiWorkerMirroredStrategy ready, replica {} of {}{}", task, collectives.rank(),
            collectives.size(), Roles.isChief(cluster, task) ? " (chief)" : "");
        MultiWorkerMirroredStrategy strategy = new MultiWorkerMirroredStrategy(runtime, collectives, communication,
            coordination.joinTimeout(), preemption);
        collectives.onFailure(strategy::collectivesFailed);
        return strategy;
      } catch (RuntimeException e) {
        if (collectives != null) {
          collectives.close();
        }
        preemption.close();
        if (runtime != null) {
          runtime.close();
        }
        throw preemption.whileFormingOr(e);
      }
    }
  }
}
