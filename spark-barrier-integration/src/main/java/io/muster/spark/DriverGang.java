package io.muster.spark;

import io.muster.cluster.HostPort;
import io.muster.cluster.TaskId;
import io.muster.internal.rpc.TaskServer;
import io.muster.launch.Attempt;
import io.muster.launch.GangEndpoint;
import io.muster.launch.GangSpec;
import io.muster.launch.TaskProcess;
import io.muster.proto.gang.Line;
import io.muster.rpc.JobToken;
import io.muster.rpc.Security;
import io.muster.rpc.TlsFiles;
import io.muster.rpc.TlsMaterial;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.time.Clock;
import java.time.Duration;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.function.Consumer;
import java.util.function.Function;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * One gang run on the driver: the launch core's {@link Attempt}, and its {@link GangEndpoint} on a
 * task server of the run's own, behind a fresh job token and, when the driver's environment has
 * {@code MUSTER_TLS_*}, TLS (the material travels to the tasks in their closure, as the token does:
 * {@link DriverLink}). What the tasks' commands print goes to the command-line sink, a train
 * function's progress to the driver's log. A gang not formed by its deadline is explained (what
 * the driver knows of its missing members) and its job ended.
 */
final class DriverGang implements AutoCloseable {

  private static final Logger log = LoggerFactory.getLogger(DriverGang.class);
  /** The driver's log of the tasks' progress ({@link TrainContext#progress}). */
  static final Logger progress = LoggerFactory.getLogger("io.muster.spark.Progress");
  /** The driver's log of the commands' lines, the default sink. */
  static final Logger commandLog = LoggerFactory.getLogger("io.muster.spark.CommandLogs");
  private static final Duration WATCH = Duration.ofMillis(100);

  private final TaskServer server;
  private final GangEndpoint endpoint;
  private final Attempt attempt;
  private final DriverLink link;
  private final ScheduledExecutorService watch;

  private DriverGang(TaskServer server, GangEndpoint endpoint, Attempt attempt, DriverLink link) {
    this.server = server;
    this.endpoint = endpoint;
    this.attempt = attempt;
    this.link = link;
    this.watch = Executors.newSingleThreadScheduledExecutor(r -> {
      Thread t = new Thread(r, "muster-gang-deadline");
      t.setDaemon(true);
      return t;
    });
  }

  /**
   * Starts attempt {@code number} of {@code gang} on {@code host}, the driver's address the executors reach.
   *
   * @param savedExitCode the exit code by which a member says it saved for a preemption
   * @param lines where the commands' lines go
   */
  static DriverGang start(String host, GangSpec gang, int number, Duration gangTimeout, int savedExitCode,
      boolean allGather, Consumer<CommandLine> lines) {
    Optional<TlsFiles> tls = TlsFiles.fromEnvironment(System.getenv());
    JobToken token = JobToken.random();
    TaskServer server = TaskServer.start(new TaskId("driver", 0), new HostPort(host, 0), new Security(token, tls));
    Attempt attempt = new Attempt(number, gang, gangTimeout, savedExitCode, Clock.systemUTC());
    GangEndpoint endpoint = new GangEndpoint("executor", new GangEndpoint.Launcher() {
      @Override
      public void lines(TaskId task, List<Line> sent) {
        for (Line line : sent) {
          if (line.getStream() == Line.Stream.PROGRESS) {
            progress.info("{}", line.getText());
          } else {
            lines.accept(new CommandLine(task.toString(), TaskProcess.Stream.valueOf(line.getStream().name()),
                line.getText()));
          }
        }
      }
    });
    endpoint.start(attempt);
    server.addService(endpoint);
    try {
      return new DriverGang(server, endpoint, attempt, new DriverLink(server.address().toString(), token.value(),
          tls.isEmpty() ? null : TlsMaterial.read(tls.get()), number, gangTimeout, allGather));
    } catch (IOException e) {
      server.closeNow();
      endpoint.close();
      throw new UncheckedIOException("cannot read the TLS material " + tls.get() + ": " + e.getMessage(), e);
    }
  }

  /** The default sink of the commands' lines: {@code [worker 2] text} at INFO. */
  static void toLog(CommandLine line) {
    commandLog.info("[{}] {}", line.task(), line.text());
  }

  Attempt attempt() {
    return attempt;
  }

  DriverLink link() {
    return link;
  }

  /**
   * When the gang has not formed by its deadline: {@code explain} says what is known of the missing
   * members (by member number), and {@code end} ends the run's job with the attempt's reason.
   */
  void onFormationOverdue(Function<List<Integer>, String> explain, Consumer<String> end) {
    watch.scheduleWithFixedDelay(() -> {
      if (attempt.formationOverdue()) {
        attempt.notFormed(explain.apply(attempt.missing().stream().map(attempt.gang()::member).toList()), true);
        String reason = attempt.outcome().map(o -> ((Attempt.Failed) o).report()).orElse("");
        log.warn("{}", reason);
        end.accept(reason);
      }
    }, WATCH.toMillis(), WATCH.toMillis(), TimeUnit.MILLISECONDS);
  }

  /** Stops serving at once: a task still linked is on a host cut off, or Spark is ending it. */
  @Override
  public void close() {
    watch.shutdownNow();
    endpoint.close();
    server.closeNow();
  }
}
