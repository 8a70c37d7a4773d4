package io.muster.cli;

import io.muster.internal.CommandOptions;
import io.muster.internal.Durations;
import io.muster.cluster.TfConfig;
import io.muster.coordination.CoordinationException;
import io.muster.coordination.CoordinationOptions;
import io.muster.internal.coordination.TaskRuntime;
import io.muster.coordination.TaskStatus;
import io.muster.rpc.DeadlineExceededException;
import io.muster.rpc.PeerUnavailableException;
import io.muster.rpc.Security;
import java.io.PrintStream;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * {@code muster check [--timeout 5m]}: run on every host of a cluster before a training job.
 * Starts this task's server on its {@code TF_CONFIG} address (hosting the coordination service
 * where this task leads), joins, prints one line per task with its state and exits 0; or, after
 * the timeout, exits 1 naming every missing task and why. Tasks then leave together through a
 * shutdown barrier, so the leader keeps serving until the last task is done with it.
 */
final class CheckCommand {
  private static final Duration SHUTDOWN_BARRIER = Duration.ofSeconds(30);

  private CheckCommand() {}

  static int run(List<String> args, Map<String, String> env, PrintStream out, PrintStream err) {
    CommandOptions options = CommandOptions.parse(args, Set.of("--timeout"), Set.of());
    Duration timeout = Durations.parse("--timeout", options.get("--timeout", "5m"));
    TfConfig config = ClusterCommand.requireTfConfig(env);
    Security security = Security.fromEnvironment(env);
    CoordinationOptions coordination = CoordinationOptions.DEFAULTS
        .withJoinTimeout(timeout)
        .withShutdownBarrierTimeout(SHUTDOWN_BARRIER);
    long start = System.nanoTime();
    try (TaskRuntime runtime = TaskRuntime.builder(config, security).options(coordination).start()) {
      runtime.join();
      long joinedMs = Duration.ofNanos(System.nanoTime() - start).toMillis();
      List<TaskStatus> states = runtime.agent().taskStates();
      for (TaskStatus s : states) {
        out.printf("%-12s %-24s %s%s%n", s.task(), config.cluster().taskAddress(s.task()), s.state(),
            s.task().equals(runtime.task()) ? "  (this task)" : "");
      }
      out.printf("all %d tasks joined in %d ms%n", states.size(), joinedMs);
      out.flush();
      runtime.agent().shutdown();
      return 0;
    } catch (DeadlineExceededException | PeerUnavailableException | CoordinationException e) {
      err.println("muster check: " + e.getMessage());
      return 1;
    }
  }
}
