package io.muster.spark;

import io.muster.cluster.ClusterSpec;
import io.muster.cluster.HostPort;
import io.muster.cluster.TaskId;
import io.muster.launch.GangSpec;
import io.muster.rpc.Security;
import io.muster.internal.rpc.TaskServer;
import java.io.Serializable;
import java.time.Duration;
import java.util.List;
import java.util.stream.Stream;
import org.apache.spark.BarrierTaskContext;
import org.apache.spark.resource.ResourceInformation;

/** What the in-JVM and the external-command tasks both read from their barrier task context. */
final class BarrierTasks {
  private BarrierTasks() {}

  /** What an in-JVM task does once its gang is formed, with its bound server and the gang's cluster. */
  interface InGang<R> {
    R run(TaskServer server, ClusterSpec cluster) throws Exception;
  }

  /**
   * Binds this task's server (port 0, on {@code host} or the executor's address), exchanges the
   * members' addresses ({@link #exchange}) so every task forms the same cluster, and runs
   * {@code body}; Spark killing the task closes the server and interrupts this thread. After a
   * failure or a kill the server stops at once: its clients may include a task on a host cut off,
   * whose call in flight would hold a graceful stop for its whole grace, and the slot with it.
   */
  static <R> R inGang(BarrierTaskContext ctx, GangSpec gang, TaskId task, Security security, String host,
      Rendezvous rendezvous, InGang<R> body) throws Exception {
    String bindHost = host != null ? host : executorHost(ctx);
    Thread worker = Thread.currentThread();
    TaskServer server = TaskServer.start(task, new HostPort(bindHost, 0), security);
    boolean done = false;
    try (KillWatch watch = new KillWatch(ctx, () -> {
      server.closeNow();
      worker.interrupt();
    })) {
      R result = body.run(server, gang.formed(exchange(ctx, rendezvous, task, server.address())).cluster());
      done = true;
      return result;
    } finally {
      if (done) {
        server.close();
      } else {
        server.closeNow();
      }
    }
  }

  /**
   * Where the tasks of a gang run learn each other's addresses: the driver's {@link GangRendezvous}
   * at {@code address}, within {@code timeout}; or Spark's {@code allGather} when {@code address}
   * is null.
   */
  record Rendezvous(String address, String token, Duration timeout) implements Serializable {
    static Rendezvous allGather() {
      return new Rendezvous(null, null, null);
    }
  }

  /** Every member's address, in member order, this task's own ({@code mine}) among them. */
  static List<HostPort> exchange(BarrierTaskContext ctx, Rendezvous rendezvous, TaskId task, HostPort mine) {
    if (rendezvous.address() == null) {
      return Stream.of(ctx.allGather(mine.toString())).map(HostPort::parse).toList();
    }
    try (GangRendezvous.Member member = new GangRendezvous.Member(rendezvous.address(), rendezvous.token(), task);
        KillWatch watch = new KillWatch(ctx, member::close)) {
      return member.exchange(ctx.partitionId(), mine, rendezvous.timeout());
    }
  }

  /** The address Spark knows this executor by (BarrierTaskInfo.address is "host" or "host:port"). */
  static String executorHost(BarrierTaskContext ctx) {
    String address = ctx.getTaskInfos()[ctx.partitionId()].address();
    int colon = address.lastIndexOf(':');
    return colon > 0 && !address.startsWith("[") && address.indexOf(':') == colon ? address.substring(0, colon) : address;
  }

  /** The CUDA devices Spark assigned this task, remapped through CUDA_VISIBLE_DEVICES; empty for none. */
  static List<String> assignedGpus(BarrierTaskContext ctx, TaskId task, int gpusPerWorker) {
    if (gpusPerWorker == 0) {
      return List.of();
    }
    ResourceInformation gpu = ctx.resourcesJMap().get("gpu");
    if (gpu == null || gpu.addresses().length < gpusPerWorker) {
      throw new IllegalStateException(task + " asked for " + gpusPerWorker
          + " GPU(s) but Spark assigned " + (gpu == null ? "none" : gpu.addresses().length)
          + "; check spark.task.resource.gpu.amount and the executors' GPU discovery script");
    }
    return Gpus.visibleDevices(List.of(gpu.addresses()), System.getenv("CUDA_VISIBLE_DEVICES"));
  }
}
