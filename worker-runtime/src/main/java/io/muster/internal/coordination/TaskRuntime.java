package io.muster.internal.coordination;

import io.muster.coordination.CoordinationException;
import io.muster.coordination.CoordinationOptions;
import io.muster.coordination.TaskState;
import io.muster.cluster.ClusterConfigException;
import io.muster.cluster.ClusterSpec;
import io.muster.cluster.HostPort;
import io.muster.cluster.Roles;
import io.muster.cluster.TaskId;
import io.muster.cluster.TfConfig;
import io.muster.internal.rpc.ChannelCache;
import io.muster.rpc.Security;
import io.muster.internal.rpc.TaskServer;
import java.util.Optional;
import java.util.Set;
import java.util.function.Consumer;

/**
 * One task's share of a job: its {@link TaskServer} on the task's {@code TF_CONFIG} address, the
 * {@link CoordinationService} when this task is the coordination leader, its channels to peers,
 * and its {@link CoordinationAgent}. {@link Builder#start()} binds the server (or takes one already
 * bound) and starts the service; {@link #join()} then waits for the whole job. Other services
 * (collectives) go on {@link #server()}. Closing stops everything in reverse order.
 */
public final class TaskRuntime implements AutoCloseable {

  private final TfConfig config;
  private final TaskServer server;
  private final boolean ownsServer;
  private final CoordinationService service;
  private final ChannelCache channels;
  private final CoordinationAgent agent;

  private TaskRuntime(TfConfig config, TaskServer server, boolean ownsServer, CoordinationService service,
      ChannelCache channels, CoordinationAgent agent) {
    this.config = config;
    this.server = server;
    this.ownsServer = ownsServer;
    this.service = service;
    this.channels = channels;
    this.agent = agent;
  }

  public static Builder builder(TfConfig config, Security security) {
    return new Builder(config, security);
  }

  /** Registers with the leader and waits for every task; see {@link CoordinationAgent#join()}. */
  public TaskRuntime join() {
    agent.join();
    return this;
  }

  public TaskId task() {
    return server.task();
  }

  public ClusterSpec cluster() {
    return config.cluster();
  }

  public TaskServer server() {
    return server;
  }

  public CoordinationAgent agent() {
    return agent;
  }

  public ChannelCache channels() {
    return channels;
  }

  /** The service when this task leads coordination. */
  public Optional<CoordinationService> service() {
    return Optional.ofNullable(service);
  }

  /**
   * Stops the agent (without a shutdown call: use {@code agent().shutdown()} first for a clean
   * exit), the service, the server unless it was handed in, and the channels. After an error the
   * server stops at once: its clients may include a task gone silent, which would hold a graceful
   * stop for seconds.
   */
  @Override
  public void close() {
    boolean failed = agent.state() == TaskState.ERROR;
    agent.close();
    if (service != null) {
      service.close();
    }
    if (ownsServer) {
      if (failed) {
        server.closeNow();
      } else {
        server.close();
      }
    }
    channels.close();
  }

  /** Options, the error callback, an already bound server; then {@link #start()}. */
  public static final class Builder {
    private final TfConfig config;
    private final Security security;
    private TaskServer server;
    private CoordinationOptions options = CoordinationOptions.DEFAULTS;
    private Consumer<CoordinationException> onError = e -> {};
    private Set<String> recoverableJobs = Set.of();

    private Builder(TfConfig config, Security security) {
      this.config = config;
      this.security = security;
    }

    public Builder options(CoordinationOptions options) {
      this.options = options;
      return this;
    }

    public Builder onError(Consumer<CoordinationException> onError) {
      this.onError = onError;
      return this;
    }

    /** Jobs whose tasks may fail and come back while the job runs (a parameter-server job's workers). */
    public Builder recoverableJobs(Set<String> jobs) {
      this.recoverableJobs = Set.copyOf(jobs);
      return this;
    }

    /**
     * Uses a server the caller already bound (a launcher binds before it knows the cluster); its
     * port must be the one the cluster gives this task. The caller keeps ownership of it.
     */
    public Builder server(TaskServer server) {
      this.server = server;
      return this;
    }

    /**
     * Binds this task's server (hosting the coordination service if this task leads) and creates
     * the agent. Nothing waits here; call {@link TaskRuntime#join()}.
     *
     * @throws ClusterConfigException when {@code TF_CONFIG} names no task or no cluster
     */
    public TaskRuntime start() {
      TaskId task = config.requireTask();
      ClusterSpec cluster = config.cluster();
      if (!cluster.contains(task)) {
        throw new ClusterConfigException("TF_CONFIG task " + task + " is not in the cluster " + cluster
            + ": a task needs its own address to serve on");
      }
      HostPort address = HostPort.parse(cluster.taskAddress(task));
      if (server != null && (!server.task().equals(task) || server.port() != address.port())) {
        throw new IllegalArgumentException("the server handed in is " + server.task() + " on port " + server.port()
            + ", but the cluster gives " + task + " the address " + address);
      }
      TaskId leader = Roles.coordinationLeaderTask(cluster).orElseThrow();
      boolean ownsServer = server == null;
      TaskServer taskServer = ownsServer ? TaskServer.start(task, address, security) : server;
      CoordinationService service = null;
      if (task.equals(leader)) {
        service = CoordinationService.forAllTasks(cluster, options, recoverableJobs);
        taskServer.addService(service);
        taskServer.onRefusedCall(service::callerRefused);
      }
      ChannelCache channels = new ChannelCache(security);
      CoordinationAgent agent = new CoordinationAgent(cluster, task, leader,
          channels.get(HostPort.parse(cluster.taskAddress(leader))), security.tls().isPresent(), options, onError);
      return new TaskRuntime(config, taskServer, ownsServer, service, channels, agent);
    }
  }
}
