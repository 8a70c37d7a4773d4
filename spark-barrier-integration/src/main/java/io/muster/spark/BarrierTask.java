package io.muster.spark;

import io.muster.cluster.TaskId;
import io.muster.collective.CollectiveException;
import io.muster.collective.CommunicationOptions;
import io.muster.coordination.CoordinationException;
import io.muster.coordination.CoordinationOptions;
import io.muster.launch.Gang;
import io.muster.launch.GangSpec;
import io.muster.rpc.DeadlineExceededException;
import io.muster.rpc.JobToken;
import io.muster.rpc.PeerUnavailableException;
import io.muster.rpc.Security;
import io.muster.strategy.MultiWorkerMirroredStrategy;
import io.muster.strategy.PreemptedException;
import java.io.Serializable;
import java.util.Collections;
import java.util.List;
import org.apache.spark.BarrierTaskContext;
import scala.collection.Iterator;
import scala.jdk.javaapi.CollectionConverters;
import scala.runtime.AbstractFunction1;

/**
 * The body of every barrier task: bind this task's server, exchange addresses
 * ({@link BarrierTasks#exchange}, so every task forms the same {@link Gang}: partition {@code p} is member
 * {@code p}), join the job through {@link MultiWorkerMirroredStrategy}, run the train function,
 * return the chief's result.
 */
final class BarrierTask<T, R extends Serializable> extends AbstractFunction1<Iterator<T>, Iterator<R>>
    implements Serializable {

  private static final long serialVersionUID = 2L;

  private final TrainFunction<T, R> fn;
  private final GangSpec gang;
  private final String token;
  private final String host;
  private final CoordinationOptions coordination;
  private final CommunicationOptions communication;
  private final HadoopConfiguration hadoop;
  private final String driverProgress;
  private final BarrierTasks.Rendezvous rendezvous;
  private final String run;
  private final int attempt;
  private final int gpusPerWorker;

  BarrierTask(TrainFunction<T, R> fn, GangSpec gang, JobToken token, String host, CoordinationOptions coordination,
      CommunicationOptions communication, HadoopConfiguration hadoop, String driverProgress,
      BarrierTasks.Rendezvous rendezvous, String run, int attempt, int gpusPerWorker) {
    this.fn = fn;
    this.gang = gang;
    this.token = token.value();
    this.host = host;
    this.coordination = coordination;
    this.communication = communication;
    this.hadoop = hadoop;
    this.driverProgress = driverProgress;
    this.rendezvous = rendezvous;
    this.run = run;
    this.attempt = attempt;
    this.gpusPerWorker = gpusPerWorker;
  }

  @Override
  public Iterator<R> apply(Iterator<T> rows) {
    BarrierTaskContext ctx = BarrierTaskContext.get();
    TaskId task = gang.task(ctx.partitionId());
    Security security = Security.of(JobToken.of(token));
    try (ProgressLink.Sender progress = ProgressLink.Sender.connect(driverProgress, token, task);
        ExecutorNotices.Listener notices = ExecutorNotices.listen(task)) {
      return BarrierTasks.inGang(ctx, gang, task, security, host, rendezvous, (server, cluster) -> {
        try (MultiWorkerMirroredStrategy strategy = MultiWorkerMirroredStrategy.builder().cluster(cluster, task)
            .security(security).server(server).coordination(coordination).communication(communication).build()) {
          notices.deliverTo(strategy.preemption()::notice);
          R result;
          LeaveDeadline leave = new LeaveDeadline(task);
          strategy.collectives().whenFailed(leave::gangFailed);
          try (leave) {
            result = fn.train(new TrainContext<>(strategy, CollectionConverters.asJava(rows), task, run, attempt,
                BarrierTasks.assignedGpus(ctx, task, gpusPerWorker), hadoop.get(), progress::send));
          } catch (PreemptedException e) {
            // Every replica saves after the same step. Failing this task fails the stage, and Spark
            // then kills the others' tasks: they meet first, so that none is ended in its save.
            strategy.barrier("muster-saved-for-preemption");
            throw e;
          } catch (Exception e) {
            Exception failure = leave.gangsFailure(e).map(Exception.class::cast).orElseGet(() ->
                ctx.isInterrupted() || isTheClusters(e) ? e : new UsersFailureException(task + ": " + e, e));
            // Fail the whole gang now rather than leaving the other tasks to time out waiting for this one.
            // The reason names the failure's class: the other tasks' errors quote it, so whichever task's
            // failure reaches the driver first, the driver can tell a user's failure (not retried).
            strategy.abort(task + " failed: " + failure);
            throw failure;
          }
          List<R> out = strategy.isChief() ? Collections.singletonList(result) : List.of();
          return CollectionConverters.asScala(out.iterator());
        }
      });
    } catch (RuntimeException e) {
      throw e;
    } catch (Exception e) {
      throw new IllegalStateException(task + ": the train function failed: " + e.getMessage(), e);
    }
  }

  /**
   * Whether a train function's exception is the cluster's, not the function's own: a peer that
   * died or failed (the runtime's collective, coordination and RPC errors, a lost parameter
   * server), an interrupt (Spark killing the task), the task's rows lost with the executor that
   * held them (a shuffle fetch failure), or a {@link RetryableException} the function threw.
   */
  static boolean isTheClusters(Throwable e) {
    for (Throwable t = e; t != null; t = t.getCause()) {
      if (t instanceof RetryableException || t instanceof CollectiveException || t instanceof CoordinationException
          || t instanceof PeerUnavailableException || t instanceof DeadlineExceededException
          || t instanceof InterruptedException || t instanceof io.grpc.StatusRuntimeException
          || t instanceof io.muster.ps.ParameterServerUnavailableException
          || t instanceof org.apache.spark.shuffle.FetchFailedException) {
        return true;
      }
    }
    return false;
  }
}
