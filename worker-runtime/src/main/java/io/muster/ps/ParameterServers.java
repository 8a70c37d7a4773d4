package io.muster.ps;

import com.google.protobuf.InvalidProtocolBufferException;
import io.grpc.Channel;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import io.muster.cluster.ClusterSpec;
import io.muster.cluster.HostPort;
import io.muster.cluster.TaskId;
import io.muster.cluster.TaskType;
import io.muster.coordination.KeyValues;
import io.muster.internal.Durations;
import io.muster.proto.ps.CreateVariableRequest;
import io.muster.proto.ps.ParameterServerGrpc;
import io.muster.proto.ps.VariableSpec;
import io.muster.rpc.DeadlineExceededException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.Function;
import java.util.stream.LongStream;

/**
 * The job's parameter servers as one task sees them. The coordinator {@link #create creates}
 * variables, placing them (or their shards) round-robin over the ps tasks as
 * {@code ParameterServerStrategy} does, and publishes where each lives in the coordination
 * service's key-value store; any task then finds a variable by name with {@link #variable}, which
 * waits (with a deadline) until the coordinator has created and initialized it.
 */
public final class ParameterServers {

  static final String KEY_PREFIX = "muster/ps/variables/";

  private final ClusterSpec cluster;
  private final Function<HostPort, Channel> channels;
  private final KeyValues agent;
  private final Duration timeout;
  private final int numPs;
  private final AtomicInteger placed = new AtomicInteger();
  private final Map<String, Variable> known = new ConcurrentHashMap<>();

  /**
   * @param channels a channel to a ps task by its address (the caller's, closed by the caller)
   * @param agent where the chief publishes each variable's placement and the workers find it
   * @param timeout the deadline of each call to a ps (a read or an update of one shard)
   */
  public ParameterServers(ClusterSpec cluster, Function<HostPort, Channel> channels, KeyValues agent, Duration timeout) {
    this.cluster = cluster;
    this.channels = channels;
    this.agent = agent;
    this.timeout = timeout;
    this.numPs = cluster.numTasks(TaskType.PS);
    if (numPs == 0) {
      throw new IllegalArgumentException("the cluster has no ps tasks to hold variables: " + cluster);
    }
  }

  /** The number of ps tasks. */
  public int count() {
    return numPs;
  }

  /** A variable of zeros on the next ps in turn. */
  public Variable create(String name, long[] shape, Optimizer optimizer) {
    return create(name, shape, null, optimizer, s -> 1);
  }

  /**
   * A variable with these initial values (row-major; null for zeros), split by the partitioner,
   * each shard on the next ps in turn; visible to {@link #variable} once initialized.
   *
   * @throws IllegalArgumentException when a variable of this name exists with another shape or
   *     optimizer, or the partitioner's answer is not a positive shard count
   */
  public Variable create(String name, long[] shape, float[] initial, Optimizer optimizer, Partitioner partitioner) {
    check(name, shape, initial);
    int shards = shape.length == 0 ? 1 : partitioner.shards(shape.clone());
    List<long[]> ranges = shape.length == 0 ? List.<long[]>of(new long[] {0, 1}) : Partitioner.rowRanges(shape[0], shards);
    List<Variable.Shard> placement = new ArrayList<>();
    for (int i = 0; i < ranges.size(); i++) {
      long[] range = ranges.get(i);
      String shardName = ranges.size() == 1 ? name : name + "/part_" + i;
      TaskId ps = new TaskId(TaskType.PS.jobName(), Math.floorMod(placed.getAndIncrement(), numPs));
      long[] shardShape = shape.length == 0 ? shape : Partitioner.shardShape(shape, range[1]);
      createOn(ps, shardName, shardShape, optimizer);
      placement.add(new Variable.Shard(shardName, ps, range[0], range[1]));
    }
    return publish(name, shape, initial, placement);
  }

  /**
   * A variable placed whole on the ps task of your choice (TensorFlow's {@code with
   * tf.device("/job:ps/task:1")}), with these initial values (null for zeros).
   */
  public Variable createOn(TaskId ps, String name, long[] shape, float[] initial, Optimizer optimizer) {
    check(name, shape, initial);
    if (!ps.is(TaskType.PS) || ps.index() >= numPs) {
      throw new IllegalArgumentException("variables live on ps tasks; the cluster has ps 0.." + (numPs - 1)
          + ", not " + ps);
    }
    createOn(ps, name, shape, optimizer);
    return publish(name, shape, initial, List.of(new Variable.Shard(name, ps, 0, shape.length == 0 ? 1 : shape[0])));
  }

  private static void check(String name, long[] shape, float[] initial) {
    if (name.isEmpty() || name.contains("/part_")) {
      throw new IllegalArgumentException("variable name must be non-empty and not contain '/part_', was '" + name + "'");
    }
    long elements = HostedVariable.elements(shape);
    if (initial != null && initial.length != elements) {
      throw new IllegalArgumentException("variable " + name + " of shape " + Arrays.toString(shape) + " needs "
          + elements + " initial values, got " + initial.length);
    }
  }

  /** Initializes the variable, then publishes where it lives, so nobody finds it before it holds its initial values. */
  private Variable publish(String name, long[] shape, float[] initial, List<Variable.Shard> placement) {
    Variable variable = new Variable(name, shape, placement, this::stub, timeout);
    if (initial != null) {
      variable.assign(initial);
    }
    VariableSpec.Builder spec = VariableSpec.newBuilder().setName(name)
        .addAllShape(LongStream.of(shape).boxed().toList());
    placement.forEach(s -> spec.addShards(io.muster.proto.ps.Shard.newBuilder().setName(s.name())
        .setPsTask(s.ps().index()).setFirstRow(s.firstRow()).setRows(s.rows())));
    agent.insert(KEY_PREFIX + name, spec.build().toByteArray(), true);
    known.put(name, variable);
    return variable;
  }

  /**
   * The variable of this name, waiting up to {@code wait} for the coordinator to create it.
   *
   * @throws DeadlineExceededException naming the variable when it is not created in time
   */
  public Variable variable(String name, Duration wait) {
    Variable cached = known.get(name);
    if (cached != null) {
      return cached;
    }
    byte[] bytes;
    try {
      bytes = agent.get(KEY_PREFIX + name, wait);
    } catch (DeadlineExceededException e) {
      throw new DeadlineExceededException("variable " + name + " was not created within " + Durations.words(wait)
          + "; the coordinator (chief) creates variables before workers can use them", wait);
    }
    try {
      VariableSpec spec = VariableSpec.parseFrom(bytes);
      List<Variable.Shard> shards = spec.getShardsList().stream().map(s -> new Variable.Shard(s.getName(),
          new TaskId(TaskType.PS.jobName(), s.getPsTask()), s.getFirstRow(), s.getRows())).toList();
      Variable variable = new Variable(name, spec.getShapeList().stream().mapToLong(Long::longValue).toArray(), shards,
          this::stub, timeout);
      known.putIfAbsent(name, variable);
      return known.get(name);
    } catch (InvalidProtocolBufferException e) {
      throw new IllegalStateException("the coordination service holds an unreadable placement for variable " + name, e);
    }
  }

  /** The variable of this name, waiting up to the call timeout for it to be created. */
  public Variable variable(String name) {
    return variable(name, timeout);
  }

  private void createOn(TaskId ps, String name, long[] shape, Optimizer optimizer) {
    try {
      ParameterServerGrpc.newBlockingStub(channels.apply(address(ps)))
          .withDeadlineAfter(timeout.toNanos(), TimeUnit.NANOSECONDS)
          .create(CreateVariableRequest.newBuilder().setName(name).addAllShape(LongStream.of(shape).boxed().toList())
              .setOptimizer(optimizer.toProto()).build());
    } catch (StatusRuntimeException e) {
      Status.Code code = e.getStatus().getCode();
      if (code == Status.Code.UNAVAILABLE || code == Status.Code.DEADLINE_EXCEEDED) {
        throw new ParameterServerUnavailableException(ps, "parameter server " + ps + " at " + address(ps)
            + " did not answer the creation of variable " + name + ": " + code + " " + e.getStatus().getDescription(), e);
      }
      throw new IllegalArgumentException(e.getStatus().getDescription(), e);
    }
  }

  private ParameterServerGrpc.ParameterServerStub stub(TaskId ps) {
    return ParameterServerGrpc.newStub(channels.apply(address(ps)));
  }

  private HostPort address(TaskId ps) {
    return HostPort.parse(cluster.taskAddress(ps));
  }
}
