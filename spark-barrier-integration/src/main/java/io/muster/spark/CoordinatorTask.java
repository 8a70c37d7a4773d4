package io.muster.spark;

import io.muster.cluster.TaskId;
import io.muster.coordination.CoordinationOptions;
import io.muster.launch.GangSpec;
import io.muster.rpc.JobToken;
import io.muster.rpc.Security;
import io.muster.strategy.ParameterServerStrategy;
import java.io.Serializable;
import java.util.Collections;
import java.util.List;
import org.apache.spark.BarrierTaskContext;
import scala.collection.Iterator;
import scala.jdk.javaapi.CollectionConverters;
import scala.runtime.AbstractFunction1;

/**
 * The body of every barrier task of a parameter-server gang: bind this task's server, exchange
 * addresses ({@link BarrierTasks#exchange}), join through {@link ParameterServerStrategy}; the chief runs
 * the coordinator function and returns its result, the workers and ps tasks serve until it is done.
 */
final class CoordinatorTask<R extends Serializable> extends AbstractFunction1<Iterator<Object>, Iterator<R>>
    implements Serializable {

  private static final long serialVersionUID = 1L;

  private final CoordinatorFunction<R> fn;
  private final CoordinatorFunction.Registry functions;
  private final GangSpec gang;
  private final String token;
  private final String host;
  private final CoordinationOptions coordination;
  private final BarrierTasks.Rendezvous rendezvous;

  CoordinatorTask(CoordinatorFunction<R> fn, CoordinatorFunction.Registry functions, GangSpec gang, JobToken token,
      String host, CoordinationOptions coordination, BarrierTasks.Rendezvous rendezvous) {
    this.fn = fn;
    this.functions = functions;
    this.gang = gang;
    this.token = token.value();
    this.host = host;
    this.coordination = coordination;
    this.rendezvous = rendezvous;
  }

  @Override
  public Iterator<R> apply(Iterator<Object> ignored) {
    BarrierTaskContext ctx = BarrierTaskContext.get();
    TaskId task = gang.task(ctx.partitionId());
    Security security = Security.of(JobToken.of(token));
    try {
      return BarrierTasks.inGang(ctx, gang, task, security, host, rendezvous, (server, cluster) -> {
        try (ParameterServerStrategy strategy = ParameterServerStrategy.builder().cluster(cluster, task)
            .security(security).server(server).coordination(coordination).functions(functions.create()).build()) {
          if (!strategy.isCoordinator()) {
            strategy.serve();
            return CollectionConverters.asScala(Collections.<R>emptyIterator());
          }
          try {
            return CollectionConverters.asScala(List.of(fn.coordinate(strategy.coordinator())).iterator());
          } catch (Exception e) {
            throw BarrierTask.isTheClusters(e) ? e : new UsersFailureException(task + ": " + e, e);
          }
        }
      });
    } catch (RuntimeException e) {
      throw e;
    } catch (Exception e) {
      throw new IllegalStateException(task + ": the coordinator function failed: " + e.getMessage(), e);
    }
  }
}
