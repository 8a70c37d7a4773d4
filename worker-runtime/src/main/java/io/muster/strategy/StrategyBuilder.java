package io.muster.strategy;

import io.muster.cluster.ClusterSpec;
import io.muster.cluster.TaskId;
import io.muster.cluster.TfConfig;
import io.muster.coordination.CoordinationOptions;
import io.muster.internal.coordination.TaskRuntime;
import io.muster.internal.rpc.TaskServer;
import io.muster.rpc.BoundServer;
import io.muster.rpc.Security;
import java.util.Map;

/**
 * What both strategies' builders take: the task (its {@code TF_CONFIG}, or a cluster and a task),
 * its security, a server the launcher already bound, the coordination options, and the
 * environment {@code TF_CONFIG} and {@code MUSTER_JOB_TOKEN} are read from when not given.
 * {@code join()} checks them, naming an option set to null.
 *
 * @param <B> the strategy's own builder, which each setter returns
 */
public abstract class StrategyBuilder<B extends StrategyBuilder<B>> {
  private TfConfig config;
  private Security security;
  private BoundServer server;
  private CoordinationOptions coordination;
  private Map<String, String> environment = System.getenv();

  StrategyBuilder(CoordinationOptions defaultCoordination) {
    this.coordination = defaultCoordination;
  }

  public B tfConfig(TfConfig value) {
    this.config = value;
    return self();
  }

  public B cluster(ClusterSpec cluster, TaskId task) {
    this.config = TfConfig.of(cluster, task);
    return self();
  }

  public B security(Security value) {
    this.security = value;
    return self();
  }

  /**
   * For launchers: a server the launcher already bound for this task, so that the address it
   * published is the one served (it keeps ownership).
   */
  public B server(BoundServer value) {
    this.server = value;
    return self();
  }

  public B coordination(CoordinationOptions value) {
    this.coordination = value;
    return self();
  }

  /** Where {@code TF_CONFIG} and {@code MUSTER_JOB_TOKEN} are read from when not given. */
  public B environment(Map<String, String> value) {
    this.environment = value;
    return self();
  }

  @SuppressWarnings("unchecked")
  private B self() {
    return (B) this;
  }

  /** Checks the common options: an option set to null fails here, naming itself. */
  final void checkCommon() {
    requireSet(coordination, "coordination");
    requireSet(environment, "environment");
  }

  /** The task's {@code TF_CONFIG}: the one given, or the environment's. */
  final TfConfig tfConfig() {
    return config != null ? config : TfConfig.fromEnvironment(environment);
  }

  /** The task's security: the one given, or the environment's. */
  final Security security() {
    return security != null ? security : Security.fromEnvironment(environment);
  }

  final CoordinationOptions coordination() {
    return coordination;
  }

  /** A runtime for the task with the coordination options, on the launcher's server when it gave one. */
  final TaskRuntime.Builder runtime(TfConfig tfConfig, Security taskSecurity) {
    TaskRuntime.Builder runtime = TaskRuntime.builder(tfConfig, taskSecurity).options(coordination);
    if (server != null && !(server instanceof TaskServer)) {
      throw new IllegalArgumentException("server must be one a Muster launcher bound, was a "
          + server.getClass().getName());
    }
    return server == null ? runtime : runtime.server((TaskServer) server);
  }

  /** @throws IllegalArgumentException naming {@code option} when {@code value} is null */
  static void requireSet(Object value, String option) {
    if (value == null) {
      throw new IllegalArgumentException(option + " must not be null; leave it unset for its default");
    }
  }
}
