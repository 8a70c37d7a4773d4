package io.muster.spark;

import io.muster.cluster.HostPort;
import io.muster.cluster.TaskId;
import io.muster.internal.rpc.ChannelCache;
import io.muster.launch.GangMember;
import io.muster.launch.Heartbeats;
import io.muster.proto.gang.TaskRef;
import io.muster.rpc.Security;
import java.time.Clock;
import java.util.List;
import java.util.stream.Stream;
import org.apache.spark.BarrierTaskContext;
import org.apache.spark.SparkEnv;

/**
 * A barrier task's link to its driver ({@link DriverGang}): it joins the gang of the run's attempt
 * with the address it bound, learns every member's address, and through it ({@link #member()})
 * reports what its command prints and how it ended, and hears what the driver tells it. Spark
 * killing the task while it waits for the gang ends the wait.
 */
final class TaskLink implements AutoCloseable {
  private final BarrierTaskContext ctx;
  private final DriverLink driver;
  private final HostPort address;
  private final ChannelCache channels;
  private final GangMember member;

  private TaskLink(BarrierTaskContext ctx, DriverLink driver, HostPort address, ChannelCache channels,
      GangMember member) {
    this.ctx = ctx;
    this.driver = driver;
    this.address = address;
    this.channels = channels;
    this.member = member;
  }

  /** Joins the driver's gang as {@code task}, bound at {@code address}; the driver's words go to {@code listener}. */
  static TaskLink join(BarrierTaskContext ctx, DriverLink driver, Security security, TaskId task, HostPort address,
      GangMember.Listener listener) {
    ChannelCache channels = new ChannelCache(security);
    SparkEnv executor = SparkEnv.get();
    TaskRef ref = TaskRef.newBuilder().setJob(task.job()).setIndex(task.index()).setAttempt(driver.attempt())
        .setContainerId(executor.executorId()).build();
    // the host as Spark names it (host3), which its reports name too; the address may be its IP
    String host = executor.blockManager().blockManagerId().host();
    GangMember member = GangMember.join(channels.get(HostPort.parse(driver.address())), ref, address, host,
        "the driver at " + driver.address(), listener, Clock.systemUTC());
    return new TaskLink(ctx, driver, address, channels, member);
  }

  /**
   * Every member's address, in member order (partition {@code p} is member {@code p}), once the
   * whole gang has joined: from the driver, or from Spark's {@code allGather}.
   *
   * @throws GangMember.GangEndedException when the gang will not form (the driver's words), or Spark killed the task
   */
  List<HostPort> awaitGang() throws InterruptedException {
    if (driver.allGather()) {
      return Stream.of(ctx.allGather(address.toString())).map(HostPort::parse).toList();
    }
    try (KillWatch watch = new KillWatch(ctx, member::close)) {
      return member.awaitGang(driver.gangTimeout().plus(Heartbeats.CALL));
    }
  }

  GangMember member() {
    return member;
  }

  @Override
  public void close() {
    member.close();
    channels.close();
  }
}
