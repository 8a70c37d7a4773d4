package io.muster.spark;

import io.muster.cluster.TaskId;
import io.muster.collective.CommunicationOptions;
import io.muster.coordination.CoordinationOptions;
import io.muster.launch.Attempt;
import io.muster.launch.GangSpec;
import io.muster.launch.OnPreemption;
import io.muster.proto.gang.Line;
import io.muster.strategy.MultiWorkerMirroredStrategy;
import io.muster.strategy.PreemptedException;
import java.io.Serializable;
import java.util.Collections;
import java.util.List;
import java.util.Optional;
import org.apache.spark.BarrierTaskContext;
import scala.collection.Iterator;
import scala.jdk.javaapi.CollectionConverters;
import scala.runtime.AbstractFunction1;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The body of every barrier task: bind this task's server, join the driver's gang
 * ({@link BarrierTasks#inGang}, so every task forms the same {@link io.muster.launch.Gang}: partition
 * {@code p} is member {@code p}), join the job through {@link MultiWorkerMirroredStrategy}, run the
 * train function, tell the driver how it ended, return the chief's result.
 */
final class BarrierTask<T, R extends Serializable> extends AbstractFunction1<Iterator<T>, Iterator<R>>
    implements Serializable {

  private static final long serialVersionUID = 3L;
  private static final Logger log = LoggerFactory.getLogger(BarrierTask.class);

  private final TrainFunction<T, R> fn;
  private final GangSpec gang;
  private final String host;
  private final CoordinationOptions coordination;
  private final CommunicationOptions communication;
  private final HadoopConfiguration hadoop;
  private final DriverLink driver;
  private final String run;
  private final int gpusPerWorker;

  BarrierTask(TrainFunction<T, R> fn, GangSpec gang, String host, CoordinationOptions coordination,
      CommunicationOptions communication, HadoopConfiguration hadoop, DriverLink driver, String run,
      int gpusPerWorker) {
    this.fn = fn;
    this.gang = gang;
    this.host = host;
    this.coordination = coordination;
    this.communication = communication;
    this.hadoop = hadoop;
    this.driver = driver;
    this.run = run;
    this.gpusPerWorker = gpusPerWorker;
  }

  @Override
  public Iterator<R> apply(Iterator<T> rows) {
    BarrierTaskContext ctx = BarrierTaskContext.get();
    TaskId task = gang.task(ctx.partitionId());
    BarrierTasks.Heed heed = new BarrierTasks.Heed();
    try (ExecutorNotices.Listener notices = ExecutorNotices.listen(task)) {
      return BarrierTasks.inGang(ctx, gang, task, driver, host, heed, (server, cluster, security, link) -> {
        try (MultiWorkerMirroredStrategy strategy = MultiWorkerMirroredStrategy.builder().cluster(cluster, task)
            .security(security).server(server).coordination(coordination).communication(communication).join()) {
          heed.onPreempt = strategy.preemption()::notice;
          notices.deliverTo(notice -> {
            link.member().notice(notice);
            strategy.preemption().notice(notice);
          });
          LeaveDeadline leave = new LeaveDeadline(task);
          heed.onAbort = leave::gangFailed;
          strategy.collectives().whenFailed(leave::gangFailed);
          R result;
          try (leave) {
            result = fn.train(new TrainContext<>(strategy, CollectionConverters.asJava(rows), task, run,
                driver.attempt(), BarrierTasks.assignedGpus(ctx, task, gpusPerWorker), hadoop.get(), line -> {
                  if (!link.member().line(Line.Stream.PROGRESS, line)) {
                    log.info("{}", line); // the driver is gone: the executor's log keeps it
                  }
                }));
          } catch (PreemptedException e) {
            // Every replica saves after the same step. Failing this task fails the stage, and Spark
            // then kills the others' tasks: they meet first, so that none is ended in its save.
            strategy.barrier("muster-saved-for-preemption");
            link.member().exited(new Attempt.Exit(OnPreemption.TENSORFLOW.savedExitCode(), false,
                "saved for the preemption: " + e.getMessage(), List.of()));
            BarrierTasks.awaitVerdict(link, true);
            throw e;
          } catch (Exception e) {
            Exception failure = leave.gangsFailure(e).map(Exception.class::cast).orElse(e);
            Attempt.Exit exit = BarrierTasks.exitOf(failure, ctx.isInterrupted());
            link.member().exited(exit);
            // Fail the whole gang now rather than leaving the other tasks to time out waiting for this one.
            strategy.abort(task + " failed: " + failure);
            Optional<String> gangs = BarrierTasks.awaitVerdict(link, false);
            throw new IllegalStateException(task + ": the train function " + exit.story()
                + gangs.map(why -> "; the gang failed: " + why).orElse(""), failure);
          }
          link.member().exited(new Attempt.Exit(0, false, "", List.of()));
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
}
