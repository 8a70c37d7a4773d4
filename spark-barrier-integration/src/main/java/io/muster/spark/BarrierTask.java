package io.muster.spark;

import io.muster.cluster.ClusterSpec;
import io.muster.cluster.HostPort;
import io.muster.cluster.TaskId;
import io.muster.collective.CommunicationOptions;
import io.muster.coordination.CoordinationOptions;
import io.muster.rpc.JobToken;
import io.muster.rpc.Security;
import io.muster.rpc.TaskServer;
import io.muster.strategy.MultiWorkerMirroredStrategy;
import java.io.Serializable;
import java.time.Duration;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import org.apache.spark.BarrierTaskContext;
import scala.collection.Iterator;
import scala.jdk.javaapi.CollectionConverters;
import scala.runtime.AbstractFunction1;

/**
 * The body of every barrier task: bind this task's server, exchange addresses with
 * {@code allGather} (so the cluster is the same list, in partition order, on every task), join
 * the job through {@link MultiWorkerMirroredStrategy}, run the train function, return the
 * chief's result. Holds only serializable values; options travel as numbers.
 */
final class BarrierTask<T, R extends Serializable> extends AbstractFunction1<Iterator<T>, Iterator<R>>
    implements Serializable {

  private static final long serialVersionUID = 1L;

  private final TrainFunction<T, R> fn;
  private final String token;
  private final String host;
  private final long heartbeatMillis;
  private final long joinMillis;
  private final long shutdownMillis;
  private final String implementation;
  private final long bytesPerPack;
  private final int attempt;
  private final int gpusPerWorker;

  BarrierTask(TrainFunction<T, R> fn, JobToken token, String host, CoordinationOptions coordination,
      CommunicationOptions communication, int attempt, int gpusPerWorker) {
    this.attempt = attempt;
    this.gpusPerWorker = gpusPerWorker;
    this.fn = fn;
    this.token = token.value();
    this.host = host;
    this.heartbeatMillis = coordination.heartbeatTimeout().toMillis();
    this.joinMillis = coordination.joinTimeout().toMillis();
    this.shutdownMillis = coordination.shutdownBarrierTimeout().toMillis();
    this.implementation = communication.implementation().name();
    this.bytesPerPack = communication.bytesPerPack();
  }

  @Override
  public Iterator<R> apply(Iterator<T> rows) {
    BarrierTaskContext ctx = BarrierTaskContext.get();
    TaskId task = new TaskId("worker", ctx.partitionId());
    Security security = Security.of(JobToken.of(token));
    String bindHost = host != null ? host : executorHost(ctx);
    Thread worker = Thread.currentThread();
    try (TaskServer server = TaskServer.start(task, new HostPort(bindHost, 0), security);
        KillWatch watch = new KillWatch(ctx, worker, server)) {
      String[] addresses = ctx.allGather(server.address().toString());
      ClusterSpec cluster = ClusterSpec.of(Map.of("worker", List.of(addresses)));
      CoordinationOptions coordination = CoordinationOptions.DEFAULTS
          .withHeartbeatTimeout(Duration.ofMillis(heartbeatMillis))
          .withJoinTimeout(Duration.ofMillis(joinMillis))
          .withShutdownBarrierTimeout(Duration.ofMillis(shutdownMillis));
      CommunicationOptions communication = CommunicationOptions.DEFAULTS
          .withImplementation(CommunicationOptions.Implementation.parse(implementation))
          .withBytesPerPack(bytesPerPack);
      try (MultiWorkerMirroredStrategy strategy = MultiWorkerMirroredStrategy.builder()
          .cluster(cluster, task).security(security).server(server)
          .coordination(coordination).communication(communication).build()) {
        R result;
        try {
          result = fn.train(new TrainContext<>(strategy, CollectionConverters.asJava(rows), task, attempt, gpus(ctx)));
        } catch (Exception e) {
          // Fail the whole gang now rather than leaving the other tasks to time out waiting for this one.
          strategy.abort(task + " failed: " + e);
          throw e;
        }
        List<R> out = strategy.isChief() ? Collections.singletonList(result) : List.of();
        return CollectionConverters.asScala(out.iterator());
      }
    } catch (RuntimeException e) {
      throw e;
    } catch (Exception e) {
      throw new IllegalStateException(task + ": the train function failed: " + e.getMessage(), e);
    }
  }

  /**
   * Spark kills the other tasks of a failed barrier stage without interrupting their threads
   * ({@code spark.task.interruptOnCancel} is false by default); a task waiting to join would then
   * hold its slot until its deadline. This watch interrupts the task and stops its server instead.
   */
  private static final class KillWatch implements AutoCloseable {
    private final java.util.concurrent.ScheduledExecutorService timer;

    KillWatch(BarrierTaskContext ctx, Thread worker, TaskServer server) {
      timer = java.util.concurrent.Executors.newSingleThreadScheduledExecutor(r -> {
        Thread t = new Thread(r, "muster-kill-watch-" + ctx.partitionId());
        t.setDaemon(true);
        return t;
      });
      timer.scheduleWithFixedDelay(() -> {
        if (ctx.isInterrupted()) {
          server.close();
          worker.interrupt();
          timer.shutdown();
        }
      }, 200, 200, java.util.concurrent.TimeUnit.MILLISECONDS);
    }

    @Override
    public void close() {
      timer.shutdownNow();
    }
  }

  private List<String> gpus(BarrierTaskContext ctx) {
    if (gpusPerWorker == 0) {
      return List.of();
    }
    org.apache.spark.resource.ResourceInformation gpu = ctx.resourcesJMap().get("gpu");
    if (gpu == null || gpu.addresses().length < gpusPerWorker) {
      throw new IllegalStateException("worker " + ctx.partitionId() + " asked for " + gpusPerWorker
          + " GPU(s) but Spark assigned " + (gpu == null ? "none" : gpu.addresses().length)
          + "; check spark.task.resource.gpu.amount and the executors' GPU discovery script");
    }
    return Gpus.visibleDevices(List.of(gpu.addresses()), System.getenv("CUDA_VISIBLE_DEVICES"));
  }

  /** The address Spark knows this executor by (BarrierTaskInfo.address is "host" or "host:port"). */
  private static String executorHost(BarrierTaskContext ctx) {
    String address = ctx.getTaskInfos()[ctx.partitionId()].address();
    int colon = address.lastIndexOf(':');
    return colon > 0 && !address.startsWith("[") && address.indexOf(':') == colon ? address.substring(0, colon) : address;
  }
}
