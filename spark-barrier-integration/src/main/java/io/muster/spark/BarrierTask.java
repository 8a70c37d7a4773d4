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
    String bindHost = host != null ? host : BarrierTasks.executorHost(ctx);
    Thread worker = Thread.currentThread();
    try (TaskServer server = TaskServer.start(task, new HostPort(bindHost, 0), security);
        KillWatch watch = new KillWatch(ctx, () -> {
          server.close();
          worker.interrupt();
        })) {
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
          result = fn.train(new TrainContext<>(strategy, CollectionConverters.asJava(rows), task, attempt,
              BarrierTasks.assignedGpus(ctx, gpusPerWorker)));
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
}
