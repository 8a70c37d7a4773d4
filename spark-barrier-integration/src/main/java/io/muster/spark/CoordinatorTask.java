package io.muster.spark;

import io.muster.cluster.TaskId;
import io.muster.coordination.CoordinationOptions;
import io.muster.launch.Attempt;
import io.muster.launch.GangSpec;
import io.muster.strategy.ParameterServerStrategy;
import java.io.Serializable;
import java.util.List;
import java.util.Optional;
import org.apache.spark.BarrierTaskContext;
import scala.collection.Iterator;
import scala.jdk.javaapi.CollectionConverters;
import scala.runtime.AbstractFunction1;

/**
 * The body of every barrier task of a parameter-server gang: bind this task's server, join the
 * driver's gang ({@link BarrierTasks#inGang}), join through {@link ParameterServerStrategy}; the chief
 * runs the coordinator function and returns its result, the workers and ps tasks serve until it is
 * done. Each tells the driver how it ended.
 */
final class CoordinatorTask<R extends Serializable> extends AbstractFunction1<Iterator<Object>, Iterator<R>>
    implements Serializable {

  private static final long serialVersionUID = 2L;

  private final CoordinatorFunction<R> fn;
  private final CoordinatorFunction.Registry functions;
  private final GangSpec gang;
  private final String host;
  private final CoordinationOptions coordination;
  private final DriverLink driver;

  CoordinatorTask(CoordinatorFunction<R> fn, CoordinatorFunction.Registry functions, GangSpec gang, String host,
      CoordinationOptions coordination, DriverLink driver) {
    this.fn = fn;
    this.functions = functions;
    this.gang = gang;
    this.host = host;
    this.coordination = coordination;
    this.driver = driver;
  }

  @Override
  public Iterator<R> apply(Iterator<Object> ignored) {
    BarrierTaskContext ctx = BarrierTaskContext.get();
    TaskId task = gang.task(ctx.partitionId());
    try {
      return BarrierTasks.inGang(ctx, gang, task, driver, host, new BarrierTasks.Heed(),
          (server, cluster, security, link) -> {
            try (ParameterServerStrategy strategy = ParameterServerStrategy.builder().cluster(cluster, task)
                .security(security).server(server).coordination(coordination).functions(functions.create()).join()) {
              List<R> result;
              try {
                if (strategy.isCoordinator()) {
                  result = List.of(fn.coordinate(strategy.coordinator()));
                } else {
                  strategy.serve();
                  result = List.of();
                }
              } catch (Exception e) {
                Attempt.Exit exit = BarrierTasks.exitOf(e, ctx.isInterrupted());
                link.member().exited(exit);
                Optional<String> gangs = BarrierTasks.awaitVerdict(link, false);
                throw new IllegalStateException(task + ": the coordinator function " + exit.story()
                    + gangs.map(why -> "; the gang failed: " + why).orElse(""), e);
              }
              link.member().exited(new Attempt.Exit(0, false, "", List.of()));
              return CollectionConverters.asScala(result.iterator());
            }
          });
    } catch (RuntimeException e) {
      throw e;
    } catch (Exception e) {
      throw new IllegalStateException(task + ": the coordinator function failed: " + e.getMessage(), e);
    }
  }
}
