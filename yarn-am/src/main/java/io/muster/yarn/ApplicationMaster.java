package io.muster.yarn;

import io.grpc.StatusRuntimeException;
import io.muster.cluster.HostPort;
import io.muster.cluster.TaskId;
import io.muster.cluster.TaskType;
import io.muster.internal.Durations;
import io.muster.internal.rpc.ChannelCache;
import io.muster.internal.rpc.Reachability;
import io.muster.internal.rpc.TaskServer;
import io.muster.launch.EndOfJob;
import io.muster.launch.Rerun;
import io.muster.proto.gang.GangServiceGrpc;
import io.muster.proto.gang.HeartbeatRequest;
import io.muster.proto.gang.TaskRef;
import io.muster.rpc.JobToken;
import io.muster.rpc.Security;
import java.io.IOException;
import java.io.InputStream;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.URI;
import java.nio.ByteBuffer;
import java.security.PrivilegedExceptionAction;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Deque;
import java.util.EnumMap;
import java.util.HashMap;
import java.util.HashSet;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.Callable;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentSkipListMap;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.stream.Collectors;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.CommonConfigurationKeysPublic;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.io.DataOutputBuffer;
import org.apache.hadoop.security.Credentials;
import org.apache.hadoop.security.UserGroupInformation;
import org.apache.hadoop.security.token.Token;
import org.apache.hadoop.yarn.api.ApplicationConstants;
import org.apache.hadoop.yarn.api.protocolrecords.AllocateResponse;
import org.apache.hadoop.yarn.api.records.Container;
import org.apache.hadoop.yarn.api.records.ContainerId;
import org.apache.hadoop.yarn.api.records.ContainerLaunchContext;
import org.apache.hadoop.yarn.api.records.ContainerStatus;
import org.apache.hadoop.yarn.api.records.FinalApplicationStatus;
import org.apache.hadoop.yarn.api.records.LocalResource;
import org.apache.hadoop.yarn.api.records.LocalResourceType;
import org.apache.hadoop.yarn.api.records.LocalResourceVisibility;
import org.apache.hadoop.yarn.api.records.NodeId;
import org.apache.hadoop.yarn.api.records.PreemptionMessage;
import org.apache.hadoop.yarn.api.records.Priority;
import org.apache.hadoop.yarn.api.records.Resource;
import org.apache.hadoop.yarn.api.records.URL;
import org.apache.hadoop.yarn.client.api.AMRMClient;
import org.apache.hadoop.yarn.client.api.AMRMClient.ContainerRequest;
import org.apache.hadoop.yarn.client.api.NMClient;
import org.apache.hadoop.yarn.conf.YarnConfiguration;
import org.apache.hadoop.yarn.exceptions.YarnException;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Muster's YARN ApplicationMaster. For each attempt it asks for every container of the gang at
 * once (one priority per task type, so YARN never mixes them up), gives each allocated container
 * the next index of its type, releases surplus ones, and starts a {@link TaskExecutor} in each. The
 * executors register the address they bound; once all have, each gets the gang's addresses and
 * runs its command. The <em>gang deadline</em> covers allocation and registration: when it passes,
 * everything is released and the job fails with what was allocated, registered and missing (a
 * gang that did not fit will not fit the next time either). A failed task fails the attempt:
 * every other command is aborted and, where the launch core's {@link Rerun} rule says so, the
 * whole gang runs again, up to the job's attempts, with {@code MUSTER_ATTEMPT} counting up (a
 * command's own failure is first given {@link Rerun#CAUSE_WINDOW} for a cluster's failure that
 * caused it). The next attempt runs in the failed attempt's containers whose executors offer them
 * (not those stopped, on a node left out, or named for preemption), and asks YARN for the rest.
 * The job succeeds when the launch core's {@link EndOfJob} says so; the final status and
 * diagnostics name the failing task, its host, container, exit code and stderr tail.
 *
 * <p>One file because the loop over attempts is one state machine driven by three parties at once
 * (the ResourceManager's allocations, the NodeManagers' container events, the executors' calls);
 * the attempt's members ({@link Attempt}), the executors' endpoint ({@link GangEndpoint}) and the
 * status page ({@link StatusPage}) are apart.
 */
public final class ApplicationMaster {

  private static final Logger log = LoggerFactory.getLogger(ApplicationMaster.class);
  private static final Duration POLL = Duration.ofMillis(200);
  /**
   * While containers are asked for and not all given: the gang's start waits on each allocation the
   * master has not yet picked up, and an allocate call costs a millisecond or two on either side.
   */
  private static final Duration ALLOCATION_POLL = Duration.ofMillis(50);
  /** How long finished or aborted containers get to end on their own before they are stopped. */
  private static final Duration END_GRACE = Duration.ofSeconds(15);
  private static final Duration NODE_PROBE = Duration.ofSeconds(2);
  /** How many attempts preemption and lost nodes may take beyond maxAttempts before the job gives up. */
  private static final int UNCOUNTED_ATTEMPTS = 10;
  /**
   * How long an executor whose command runs may go without a word (it heartbeats every second)
   * before the master ends the attempt: a node powered off or cut off resets nothing, and YARN
   * declares its NodeManager lost only after {@code yarn.nm.liveness-monitor.expiry-interval-ms}
   * (10 minutes).
   */
  static final Duration EXECUTOR_SILENT = Duration.ofSeconds(10);
  /**
   * When a task fails while another's executor has been silent this long (three heartbeats), the
   * silence is taken for the cause: a peer cut off makes its partners fail before it is timed out.
   */
  static final Duration EXECUTOR_SUSPECT = Duration.ofSeconds(3);
  /** How long a silent ResourceManager is waited for, where the cluster does not say. */
  static final Duration RESOURCE_MANAGER_LOST = Duration.ofSeconds(60);

  private final YarnJob job;
  /** YARN's attempt of this master: 1, or 2 when YARN restarted a master that was lost. */
  private final int masterAttempt;
  private final AMRMClient<ContainerRequest> rm;
  private final NMClient nm;
  private final GangEndpoint endpoint;
  private final HostPort address;
  private final ByteBuffer containerTokens;
  /** The executors' class-data archive, where the client made one ({@link ExecutorArchive}). */
  private final Optional<String> executorArchive = Optional.ofNullable(System.getenv(ExecutorArchive.ENV))
      .filter(path -> !path.isBlank());
  /** The log levels the client passed on, which every executor gets ({@link ContainerLogging#LEVELS}). */
  private final Map<String, String> logLevels = ContainerLogging.levels(System.getenv());
  private final Map<String, Container> containers = new HashMap<>();
  private final Set<String> stopping = new HashSet<>();
  /** The containers YARN named in a preemption message: never kept for a next attempt. */
  private final Set<String> namedForPreemption = new HashSet<>();
  /** The nodes left out of the job's later attempts (YARN's blacklist), each with why. */
  private final Map<String, String> lostNodes = new ConcurrentSkipListMap<>();
  /** The NodeManagers' start and stop calls, which block for as long as a node does not answer. */
  private final ExecutorService nodeCalls = Executors.newCachedThreadPool(r -> {
    Thread t = new Thread(r, "muster-node-call");
    t.setDaemon(true);
    return t;
  });
  private volatile Attempt current;
  private volatile String state = "running";
  private volatile String diagnostics = "";

  private ApplicationMaster(YarnJob job, int masterAttempt, AMRMClient<ContainerRequest> rm, NMClient nm,
      GangEndpoint endpoint, HostPort address, ByteBuffer containerTokens) {
    this.job = job;
    this.masterAttempt = masterAttempt;
    this.rm = rm;
    this.nm = nm;
    this.endpoint = endpoint;
    this.address = address;
    this.containerTokens = containerTokens;
  }

  public static void main(String[] args) throws Exception {
    if (args.length == 1 && args[0].equals(TaskExecutor.WARM_UP)) {
      warmUp();
      System.exit(TaskExecutor.warmUp());
    }
    YarnJob job = Handoff.job();
    Configuration conf = SiteConfiguration.decode(System.getenv(SiteConfiguration.ENV));
    // the client's security settings (Kerberos) over the node's, like the rest of its configuration
    UserGroupInformation.setConfiguration(conf);
    Credentials credentials = UserGroupInformation.getCurrentUser().getCredentials();
    JobToken token = Handoff.token(credentials).orElseThrow(() -> new IllegalStateException(
        "the job token is not in the master's credentials; submit with muster submit"));
    AMRMClient<ContainerRequest> rm = AMRMClient.createAMRMClient();
    rm.init(resourceManagerClientConfiguration(conf));
    rm.start();
    NMClient nm = NMClient.createNMClient();
    nm.init(conf);
    nm.start();
    String host = System.getenv(ApplicationConstants.Environment.NM_HOST.name());
    try (TaskServer server = TaskServer.start(new TaskId("master", 0), new HostPort(host, 0), Security.of(token))) {
      GangEndpoint endpoint = new GangEndpoint(conf.getBoolean(MusterClient.KEEP_CONTAINERS, true));
      server.addService(endpoint);
      warmUpInBackground(server.address(), token);
      ContainerId self = ContainerId.fromString(System.getenv(ApplicationConstants.Environment.CONTAINER_ID.name()));
      ApplicationMaster master = new ApplicationMaster(job, self.getApplicationAttemptId().getAttemptId(), rm, nm,
          endpoint, server.address(), containerTokens(credentials));
      try (StatusPage page = new StatusPage(host, master::status)) {
        rm.registerApplicationMaster(host, server.port(), page.url());
        log.info("registered with the ResourceManager{}; serving the executors at {}", TaskExecutor.startCost(),
            server.address());
        Outcome outcome;
        try {
          outcome = master.run();
        } catch (ResourceManagerLost e) {
          // nobody is left to report to: end what this master started, and go
          log.error("{}; ending the job's containers and exiting", e.getMessage());
          master.stopContainers(master.current.runningContainers());
          master.nodeCalls.shutdown();
          master.nodeCalls.awaitTermination(END_GRACE.toMillis(), TimeUnit.MILLISECONDS);
          System.exit(1);
          return;
        }
        log.info("the job {}: {}", outcome.status(), outcome.diagnostics());
        master.state = outcome.status() == FinalApplicationStatus.SUCCEEDED ? "succeeded" : "failed";
        master.diagnostics = outcome.diagnostics();
        master.deleteStagedFiles(conf, self.getApplicationAttemptId().getApplicationId().toString());
        rm.unregisterApplicationMaster(outcome.status(), outcome.diagnostics(), page.url());
      }
    } finally {
      nm.stop();
      rm.stop();
    }
  }

  record Outcome(FinalApplicationStatus status, String diagnostics) {}

  /**
   * What {@link ExecutorArchive} records of the master, against no cluster: its configuration and
   * login, its ResourceManager client up to a registration and an ask that find nobody there, its
   * NodeManager client up to a container's launch that finds nobody either (the records of both
   * built and encoded, as a job's are), its endpoint with the call it makes to itself, and its
   * status page.
   */
  private static void warmUp() throws Exception {
    Configuration conf = SiteConfiguration.decode(SiteConfiguration.encode(new YarnConfiguration()));
    UserGroupInformation.setConfiguration(conf);
    UserGroupInformation.getCurrentUser().getCredentials();
    int closedPort;
    try (ServerSocket closed = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
      closedPort = closed.getLocalPort();
    } // closed now: every call is refused at once
    Configuration nobody = resourceManagerClientConfiguration(conf);
    nobody.set(YarnConfiguration.RM_SCHEDULER_ADDRESS, "127.0.0.1:" + closedPort);
    nobody.setLong(YarnConfiguration.RESOURCEMANAGER_CONNECT_MAX_WAIT_MS, 0);
    nobody.setLong(YarnConfiguration.CLIENT_NM_CONNECT_MAX_WAIT_MS, 1); // its least: one retry, 1 ms later
    nobody.setLong(YarnConfiguration.CLIENT_NM_CONNECT_RETRY_INTERVAL_MS, 1);
    YarnJob job = TaskExecutor.warmUpJob();
    AMRMClient<ContainerRequest> rm = AMRMClient.createAMRMClient();
    rm.init(nobody);
    rm.start();
    try {
      refused(() -> rm.registerApplicationMaster("127.0.0.1", 0, ""));
      rm.addContainerRequest(new ContainerRequest(resource(job.resources().get(TaskType.WORKER)), null, null,
          Priority.newInstance(priority(TaskType.WORKER)), true, null));
      refused(() -> rm.allocate(0.5f));
    } finally {
      rm.stop();
    }
    NMClient nm = NMClient.createNMClient();
    nm.init(nobody);
    nm.start();
    try {
      NodeId node = NodeId.newInstance("127.0.0.1", closedPort);
      org.apache.hadoop.yarn.api.records.Token none = org.apache.hadoop.yarn.api.records.Token.newInstance(
          new byte[0], "warm-up", new byte[0], node.toString());
      nm.getNMTokenCache().setToken(node.toString(), none);
      ContainerId id = ContainerId.fromString("container_1_0001_01_000002");
      Container container = Container.newInstance(id, node, "127.0.0.1:0", resource(job.resources()
          .get(TaskType.WORKER)), Priority.newInstance(priority(TaskType.WORKER)), none);
      refused(() -> nm.startContainer(container, ContainerLaunchContext.newInstance(localResources(job),
          Map.of(Handoff.JOB_ENV, job.toEnvironmentValue()), List.of("true"), null,
          containerTokens(new Credentials()), null)));
    } finally {
      nm.stop();
    }
    JobToken token = JobToken.random();
    try (TaskServer server = TaskServer.start(new TaskId("master", 0), new HostPort("127.0.0.1", 0),
        Security.of(token)); StatusPage page = new StatusPage("127.0.0.1", () -> Map.of("state", "warm-up"))) {
      server.addService(new GangEndpoint(true));
      callSelf(server.address(), token);
      try (InputStream in = URI.create(page.url() + "status.json").toURL().openStream()) {
        in.readAllBytes();
      }
    }
  }

  /** A warm-up's call to a closed port: it is refused, which is all it is for. */
  private static void refused(Callable<?> call) {
    try {
      call.call();
    } catch (Exception e) {
      log.debug("the warm-up's call was refused, as it should be: {}", e.toString());
    }
  }

  /**
   * One call to this master's own endpoint, refused as from no attempt, while YARN allocates and
   * launches the containers: the executors' first calls then find the serving path loaded and
   * compiled, instead of all waiting on it at once.
   */
  private static void warmUpInBackground(HostPort self, JobToken token) {
    Thread warmUp = new Thread(() -> callSelf(self, token), "muster-warm-up");
    warmUp.setDaemon(true);
    warmUp.start();
  }

  /** One call to this master's own endpoint, refused as from no attempt, within 10 s. */
  private static void callSelf(HostPort self, JobToken token) {
    try (ChannelCache channels = new ChannelCache(Security.of(token))) {
      GangServiceGrpc.newBlockingStub(channels.get(self)).withDeadlineAfter(10, TimeUnit.SECONDS)
          .heartbeat(HeartbeatRequest.newBuilder().setTask(TaskRef.newBuilder().setJob(TaskType.WORKER.jobName())
              .setAttempt(-1).setContainerId("warm-up")).build());
    } catch (StatusRuntimeException e) {
      log.debug("the warm-up call was answered: {}", e.getStatus()); // FAILED_PRECONDITION: no such attempt
    }
  }

  /** The ResourceManager did not answer within the client's bound: the cluster is gone, or this node is cut off. */
  private static final class ResourceManagerLost extends RuntimeException {
    ResourceManagerLost(String message, Throwable cause) {
      super(message, cause);
    }
  }

  /**
   * The configuration of the master's ResourceManager client: unless the cluster sets
   * {@code yarn.resourcemanager.connect.max-wait.ms}, a ResourceManager that does not answer for
   * {@link #RESOURCE_MANAGER_LOST} (not YARN's 15 minutes) ends the master, one connection attempt
   * per retry (the IPC client's own retries would multiply the wait: 10 on a refusal, 45 on a timeout).
   */
  static Configuration resourceManagerClientConfiguration(Configuration conf) {
    Configuration rm = new Configuration(conf);
    String[] sources = conf.getPropertySources(YarnConfiguration.RESOURCEMANAGER_CONNECT_MAX_WAIT_MS);
    if (sources == null || Arrays.stream(sources).allMatch(source -> source.equals("yarn-default.xml"))) {
      rm.setLong(YarnConfiguration.RESOURCEMANAGER_CONNECT_MAX_WAIT_MS, RESOURCE_MANAGER_LOST.toMillis());
      rm.setLong(YarnConfiguration.RESOURCEMANAGER_CONNECT_RETRY_INTERVAL_MS, Math.min(5000, conf.getLong(
          YarnConfiguration.RESOURCEMANAGER_CONNECT_RETRY_INTERVAL_MS,
          YarnConfiguration.DEFAULT_RESOURCEMANAGER_CONNECT_RETRY_INTERVAL_MS)));
    }
    rm.setInt(CommonConfigurationKeysPublic.IPC_CLIENT_CONNECT_MAX_RETRIES_KEY, 0);
    rm.setInt(CommonConfigurationKeysPublic.IPC_CLIENT_CONNECT_MAX_RETRIES_ON_SOCKET_TIMEOUTS_KEY, 0);
    return rm;
  }

  /** The next allocation round; a ResourceManager that stays silent past the client's retries is {@link ResourceManagerLost}. */
  private AllocateResponse allocate() throws YarnException {
    try {
      return rm.allocate(0.5f);
    } catch (IOException e) {
      throw new ResourceManagerLost("lost the ResourceManager: no answer within "
          + Duration.ofMillis(rm.getConfig().getLong(YarnConfiguration.RESOURCEMANAGER_CONNECT_MAX_WAIT_MS, 0)).toSeconds()
          + " s (" + e.getMessage() + ")", e);
    }
  }

  /** What the status page shows. */
  Map<String, Object> status() {
    Attempt attempt = current;
    Map<String, Object> status = new LinkedHashMap<>();
    status.put("application", job.name());
    status.put("state", state);
    status.put("attempt", attempt == null ? 0 : attempt.number + 1);
    status.put("max_attempts", job.maxAttempts());
    status.put("gang", job.gang().toString());
    status.put("output_dir", job.outputDir().orElse(null));
    status.put("diagnostics", diagnostics);
    status.put("lost_nodes", Map.copyOf(lostNodes));
    status.put("preemption", attempt == null ? null : attempt.preemptionToDeliver().orElse(null));
    status.put("tasks", attempt == null ? List.of() : attempt.describeTasks());
    return status;
  }

  private enum AttemptResult { SUCCEEDED, FAILED, GANG_NOT_FORMED }

  Outcome run() throws IOException, YarnException, InterruptedException {
    List<String> failures = new ArrayList<>();
    if (masterAttempt > 1) {
      failures.add("the master was lost and YARN started it again (master attempt " + masterAttempt + "); "
          + "the gang starts over with MUSTER_ATTEMPT counting on, so commands resume from their backups");
      log.warn(failures.get(0));
    }
    // A restarted master numbers its attempts after every number the lost one could have used.
    int firstNumber = (masterAttempt - 1) * (job.maxAttempts() + UNCOUNTED_ATTEMPTS);
    try {
      return runAttempts(failures, firstNumber);
    } finally {
      if (current != null) {
        current.declineOffers("no attempt follows");
      }
    }
  }

  private Outcome runAttempts(List<String> failures, int firstNumber)
      throws IOException, YarnException, InterruptedException {
    int counted = 0; // attempts that count against maxAttempts: not the cluster's failures (preemption, a lost node)
    int preemptions = 0;
    int saved = 0; // preemptions every task saved for
    for (int n = 0; counted < job.maxAttempts() && n < job.maxAttempts() + UNCOUNTED_ATTEMPTS; n++) {
      Attempt attempt = new Attempt(firstNumber + n, job.gang(), job.gangTimeout(), job.preemption().savedExitCode());
      List<Attempt.Member> kept = current == null ? List.of() : keepOffered(current, attempt);
      current = attempt;
      endpoint.start(attempt);
      kept.forEach(m -> m.offer.accept(m.task, attempt.number));
      AttemptResult result = runAttempt(attempt);
      String which = n == counted ? "attempt " + (n + 1) + " of " + job.maxAttempts()
          : "attempt " + (n + 1) + " (" + (counted + 1) + " of " + job.maxAttempts() + " that count)";
      switch (result) {
        case SUCCEEDED:
          return new Outcome(FinalApplicationStatus.SUCCEEDED, "succeeded on " + which
              + (preemptions == 0 ? "" : " after " + (preemptions == 1 ? "1 preemption" : preemptions + " preemptions")
                  + (saved == preemptions ? "; every task saved" + (preemptions == 1 ? "" : " each time")
                      : "; every task saved in " + saved + " of them"))
              + (failures.isEmpty() ? "" : preemptions == failures.size() ? "; earlier attempts were preempted:\n"
                  + String.join("\n", failures) : "; earlier attempts failed:\n" + String.join("\n", failures)));
        case GANG_NOT_FORMED:
          failures.add(which + ": " + attempt.abortReason().orElse(""));
          return new Outcome(FinalApplicationStatus.FAILED, String.join("\n", failures));
        default:
          Optional<String> lost = attempt.lostToCluster();
          counted += lost.isPresent() ? 0 : 1;
          boolean rerun = !attempt.endedByOwnFailure() || job.rerun() == Rerun.ANY_FAILURE;
          String notRerun = rerun || counted >= job.maxAttempts() ? ""
              : ", not re-run (" + Rerun.notRerun("--rerun " + Rerun.ANY_FAILURE.optionValue()) + ")";
          if (attempt.preempted()) {
            preemptions++;
            saved += attempt.savedForPreemption() ? 1 : 0;
            failures.add(which + " preempted: " + attempt.failureReport() + " (this attempt does not count)");
          } else {
            failures.add(which + " failed" + notRerun + ": " + attempt.failureReport()
                + lost.map(why -> " (" + why + "; this attempt does not count)").orElse(""));
          }
          diagnostics = String.join("\n", failures);
          if (!rerun) {
            return new Outcome(FinalApplicationStatus.FAILED, diagnostics);
          }
          log.warn("{}{}", failures.get(failures.size() - 1),
              counted < job.maxAttempts() ? "; running the whole gang again" : "");
      }
    }
    return new Outcome(FinalApplicationStatus.FAILED, String.join("\n", failures));
  }

  /**
   * Gives {@code next} the containers of {@code ended} whose executors offered them and are still
   * waiting, each for the task it ran, except those stopped, on a node left out, or named for
   * preemption: their executors are told to exit. The caller answers the kept ones' offers once
   * {@code next} is the endpoint's attempt.
   */
  private List<Attempt.Member> keepOffered(Attempt ended, Attempt next) {
    List<Attempt.Member> kept = new ArrayList<>();
    for (Attempt.Member m : ended.offered()) {
      String refused = stopping.contains(m.containerId) ? "the master stopped its container"
          : lostNodes.containsKey(m.host) ? m.host + " is left out of the job's attempts"
          : namedForPreemption.contains(m.containerId) ? "YARN named its container for preemption"
          : !m.offer.waiting() ? "its executor stopped waiting" : null;
      if (refused == null) {
        next.keep(m.task, m.containerId, m.host, m.logs);
        kept.add(m);
      } else {
        m.offer.decline(refused);
      }
    }
    if (!kept.isEmpty()) {
      log.info("attempt {}: keeping {} of attempt {}'s containers: {}", next.number + 1, kept.size(), ended.number + 1,
          kept.stream().map(m -> m.task + " in " + m.containerId).collect(Collectors.joining(", ")));
    }
    return kept;
  }

  private AttemptResult runAttempt(Attempt attempt) throws IOException, YarnException, InterruptedException {
    Map<TaskType, Deque<ContainerRequest>> outstanding = new EnumMap<>(TaskType.class);
    for (TaskType type : job.gang().types()) {
      Deque<ContainerRequest> requests = new ArrayDeque<>();
      for (int i = attempt.allocated(type); i < job.gang().count(type); i++) {
        ContainerRequest request = new ContainerRequest(resource(job.resources().get(type)), null, null,
            Priority.newInstance(priority(type)), true, job.placement().nodeLabel().orElse(null));
        rm.addContainerRequest(request);
        requests.add(request);
      }
      outstanding.put(type, requests);
    }
    log.info("attempt {}: asking YARN for the gang ({}) within {}", attempt.number + 1, job.gang(),
        Durations.words(job.gangTimeout()));
    boolean gangNotFormed = false;
    Instant endingSince = null;
    while (true) {
      AllocateResponse response = allocate();
      for (Container container : response.getAllocatedContainers()) {
        TaskType type = typeOf(container.getPriority().getPriority());
        var task = type == null || attempt.abortReason().isPresent() ? Optional.<TaskId>empty()
            : attempt.assign(type, container.getId().toString(), container.getNodeId().getHost(),
                "http://" + container.getNodeHttpAddress() + "/node/containerlogs/" + container.getId() + "/"
                    + System.getenv("USER"));
        if (task.isPresent()) {
          rm.removeContainerRequest(outstanding.get(type).poll());
          containers.put(container.getId().toString(), container);
          launch(container, task.get(), attempt);
        } else {
          rm.releaseAssignedContainer(container.getId());
        }
      }
      if (response.getPreemptionMessage() != null) {
        namedForPreemption.addAll(containersNamed(response.getPreemptionMessage()));
        attempt.preemptionAnnounced(containersNamed(response.getPreemptionMessage())).ifPresent(notice -> {
          log.warn("attempt {}: {}; {}", attempt.number + 1, notice, attempt.formed()
              ? "every task is sent SIG" + job.preemption().signal() + " to save; the attempt ends once they have exited"
              : "the gang has not formed: ending the attempt");
        });
      }
      for (ContainerStatus status : response.getCompletedContainersStatuses()) {
        attempt.containerCompleted(status.getContainerId().toString(), status.getExitStatus(), status.getDiagnostics())
            .ifPresent(t -> log.info("attempt {}: {}'s container {} ended (exit status {})", attempt.number + 1, t,
                status.getContainerId(), status.getExitStatus()));
      }
      if (attempt.abortReason().isEmpty()) {
        // after success only untracked tasks are left, being ended: their silence changes nothing
        List<Attempt.Silent> silent = attempt.verdict() instanceof EndOfJob.Succeeded ? List.of()
            : attempt.silentFor(attempt.verdict() instanceof EndOfJob.Failed ? EXECUTOR_SUSPECT : EXECUTOR_SILENT);
        if (!attempt.formed() && Instant.now().isAfter(attempt.deadline)) {
          List<String> unregistered = attempt.unregisteredContainers();
          // Allocated but silent: the node or its link failed, which another attempt may not meet; a gang
          // that got no containers at all would not fit the next time either.
          gangNotFormed = unregistered.isEmpty();
          attempt.abort("the gang was not formed within the gang timeout of " + Durations.words(job.gangTimeout())
              + ": "
              + attempt.formationReport(probeNodes(unregistered)));
        } else if (!silent.isEmpty()) {
          abortForSilence(attempt, silent);
        } else if (attempt.failureToActOn().isPresent()) {
          attempt.abortForFailure();
        }
        if (attempt.abortReason().isPresent()) {
          log.warn("attempt {}: {}", attempt.number + 1, attempt.abortReason().get());
          outstanding.values().forEach(requests -> requests.forEach(rm::removeContainerRequest));
          outstanding.clear();
        }
      }
      boolean done = attempt.abortReason().isPresent() || attempt.verdict() instanceof EndOfJob.Succeeded;
      if (done) {
        endingSince = endingSince == null ? Instant.now() : endingSince;
        if (attempt.allContainersDoneOrOffered()) {
          return gangNotFormed ? AttemptResult.GANG_NOT_FORMED
              : attempt.abortReason().isPresent() ? AttemptResult.FAILED : AttemptResult.SUCCEEDED;
        }
        // Executors end their commands at their next heartbeat, and those waiting for a gang that will
        // not form are told at once; the containers of tasks that never registered, and those whose
        // executors do not answer, are stopped; a container whose node does not confirm the stop
        // either (a node cut off) is released, and YARN reports it ended.
        if (Instant.now().isAfter(endingSince.plus(END_GRACE))) {
          stopContainers(attempt.containersToEnd());
        } else if (!attempt.formed()) {
          stopContainers(attempt.unregisteredContainers());
        }
        if (Instant.now().isAfter(endingSince.plus(END_GRACE).plus(END_GRACE))) {
          releaseContainers(attempt);
        }
      }
      boolean allocating = outstanding.values().stream().anyMatch(requests -> !requests.isEmpty());
      Thread.sleep((allocating ? ALLOCATION_POLL : POLL).toMillis());
    }
  }

  /**
   * Ends an attempt whose executors went silent. Their containers are stopped at once, or, where the
   * NodeManager does not answer either (the node is down or cut off), released (YARN reports them
   * ended) and their nodes left out of the job's later attempts. The failure is the cluster's: it
   * does not count against the job's attempts, and a task that failed after the silence began is
   * taken for its consequence.
   */
  private void abortForSilence(Attempt attempt, List<Attempt.Silent> silent) {
    Map<String, NodeAnswer> answers = probeNodes(silent.stream().map(Attempt.Silent::containerId).toList());
    List<String> accounts = new ArrayList<>();
    List<String> cutOff = new ArrayList<>();
    for (Attempt.Silent s : silent) {
      NodeAnswer node = answers.get(s.containerId());
      accounts.add(s.task() + " on " + s.host() + " (container " + s.containerId() + ") went silent: no word from its "
          + "executor for " + s.silence().toSeconds() + " s" + (node == null ? "" : "; " + node));
      if (node != null && !node.answers() && !cutOff.contains(s.host())) {
        cutOff.add(s.host());
        lostNodes.put(s.host(), "attempt " + (attempt.number + 1) + ": " + s.task() + "'s executor went silent, and "
            + node);
      }
    }
    String reason = String.join("; ", accounts) + (cutOff.isEmpty() ? "" : "; " + String.join(", ", cutOff)
        + " left out of the job's next attempts")
        + (attempt.verdict() instanceof EndOfJob.Failed ? "; after it, " + attempt.failureReport() : "");
    if (!cutOff.isEmpty()) {
      rm.updateBlacklist(cutOff, List.of());
    }
    attempt.abortLostToCluster(reason, cutOff.isEmpty() ? "an executor went silent" : "a node went silent");
    for (Attempt.Silent s : silent) {
      Container container = containers.get(s.containerId());
      if (container != null && cutOff.contains(s.host())) {
        containers.remove(s.containerId());
        rm.releaseAssignedContainer(container.getId());
      } else if (container != null) {
        stopContainer(container);
      }
    }
  }

  /**
   * The containers a preemption message names: the strict contract's (YARN takes them) and the
   * negotiable one's (the capacity scheduler's way: it takes them unless the master gives back as
   * much). For a gang any container is the whole attempt, so both count alike.
   */
  static Set<String> containersNamed(PreemptionMessage message) {
    Set<String> named = new HashSet<>();
    if (message.getStrictContract() != null) {
      message.getStrictContract().getContainers().forEach(c -> named.add(c.getId().toString()));
    }
    if (message.getContract() != null) {
      message.getContract().getContainers().forEach(c -> named.add(c.getId().toString()));
    }
    return named;
  }

  private void stopContainers(List<String> containerIds) {
    for (String id : containerIds) {
      Container container = containers.get(id);
      if (container != null) {
        stopContainer(container);
      }
    }
  }

  /** Asks the container's NodeManager to stop it, once, off the master's loop. */
  private void stopContainer(Container container) {
    if (stopping.add(container.getId().toString())) {
      nodeCalls.execute(() -> {
        try {
          nm.stopContainer(container.getId(), container.getNodeId());
        } catch (YarnException | IOException e) {
          log.warn("cannot stop container {} on {}: {}", container.getId(), container.getNodeId(), e.toString());
        }
      });
    }
  }

  private void releaseContainers(Attempt attempt) {
    for (String id : attempt.containersToEnd()) {
      Container container = containers.remove(id);
      if (container != null) {
        log.warn("attempt {}: container {} on {} did not end when stopped; releasing it", attempt.number + 1, id,
            container.getNodeId());
        rm.releaseAssignedContainer(container.getId());
      }
    }
  }

  /** What a container's NodeManager answered a connection attempt ({@link Reachability#probe}'s words). */
  record NodeAnswer(HostPort node, String answer) {
    boolean answers() {
      return answer.equals("listening");
    }

    @Override
    public String toString() {
      return "its NodeManager at " + node + ": " + (answers() ? "answers"
          : answer + (answer.startsWith("no answer") ? " (the node is down or cut off)" : ""));
    }
  }

  /** What each container's NodeManager answers a connection attempt: for executors never heard from, or gone silent. */
  private Map<String, NodeAnswer> probeNodes(List<String> containerIds) {
    Map<String, CompletableFuture<NodeAnswer>> probes = new HashMap<>();
    for (String id : containerIds) {
      Container container = containers.get(id);
      if (container != null) { // at once, each on its own thread: a silent node takes the whole probe timeout
        HostPort node = new HostPort(container.getNodeId().getHost(), container.getNodeId().getPort());
        probes.put(id, CompletableFuture.supplyAsync(() -> new NodeAnswer(node, Reachability.probe(node, NODE_PROBE)),
            nodeCalls));
      }
    }
    Map<String, NodeAnswer> answers = new HashMap<>();
    probes.forEach((id, probe) -> answers.put(id, probe.join()));
    return answers;
  }


  private void launch(Container container, TaskId task, Attempt attempt) throws IOException, YarnException {
    String command = javaCommand(ExecutorArchive.JVM_FLAGS, executorArchive, job, TaskExecutor.class,
        address + " " + task.job() + " " + task.index() + " " + attempt.number);
    Map<String, String> environment = new HashMap<>(logLevels);
    environment.put(Handoff.JOB_ENV, job.toEnvironmentValue());
    ContainerLaunchContext context = ContainerLaunchContext.newInstance(localResources(job), environment,
        List.of(command), null, containerTokens.duplicate(), null);
    log.info("attempt {}: {} runs in container {} on {}", attempt.number + 1, task, container.getId(),
        container.getNodeId().getHost());
    // Off the allocation loop: a node that does not answer holds the call for minutes (its retries).
    nodeCalls.execute(() -> {
      try {
        nm.startContainer(container, context);
      } catch (YarnException | IOException | RuntimeException e) {
        attempt.abort(task + "'s container " + container.getId() + " could not be started on "
            + container.getNodeId() + ": " + e.getMessage());
      }
    });
  }

  /**
   * The shipped files, as YARN localizes them into each container's working directory: the staged
   * runtime's jars, which never change under their names, into each node's cache of the user's files,
   * kept for the user's later jobs; the job's own files for this application.
   */
  static Map<String, LocalResource> localResources(YarnJob job) {
    Map<String, LocalResource> resources = new HashMap<>();
    for (YarnJob.Shipped file : job.shipped()) {
      resources.put(file.name(), LocalResource.newInstance(URL.fromURI(URI.create(file.uri())),
          file.archive() ? LocalResourceType.ARCHIVE : LocalResourceType.FILE,
          RuntimeStaging.isStagedRuntime(file) ? LocalResourceVisibility.PRIVATE : LocalResourceVisibility.APPLICATION,
          file.size(), file.modified()));
    }
    return resources;
  }

  /** Deletes the job's staged files, if it had any. */
  private void deleteStagedFiles(Configuration conf, String applicationId) {
    if (job.shipped().isEmpty()) {
      return;
    }
    // as the submitting user, under whose home the client staged them: this process's own login is the node's user
    UserGroupInformation submitter = UserGroupInformation.createRemoteUser(
        System.getenv(ApplicationConstants.Environment.USER.name()));
    try {
      submitter.addCredentials(UserGroupInformation.getCurrentUser().getCredentials());
      submitter.doAs((PrivilegedExceptionAction<Void>) () -> {
        FileSystem fs = FileSystem.get(conf);
        Path staging = MusterClient.stagingDir(fs, applicationId);
        if (!fs.delete(staging, true)) {
          log.warn("the job's staged files were not at {}", fs.makeQualified(staging));
        }
        return null;
      });
    } catch (IOException | InterruptedException e) {
      log.warn("cannot delete the job's staged files: {}", e.toString());
    }
  }

  /**
   * The container command that runs {@code main} with {@code arguments} in a JVM with {@code flags},
   * mapping the class-data archive where there is one, its output in the container's log files.
   */
  static String javaCommand(List<String> flags, Optional<String> archive, YarnJob job, Class<?> main,
      String arguments) {
    return ApplicationConstants.Environment.JAVA_HOME.$$() + "/bin/java " + String.join(" ", flags)
        + archive.map(path -> " " + ExecutorArchive.jvmOptions(path)).orElse("")
        + " -cp " + classpath(job) + " " + main.getName() + (arguments.isEmpty() ? "" : " " + arguments)
        + " 1>" + ApplicationConstants.LOG_DIR_EXPANSION_VAR + "/stdout"
        + " 2>" + ApplicationConstants.LOG_DIR_EXPANSION_VAR + "/stderr";
  }

  /**
   * Muster's runtime, then the node's Hadoop configuration directory, for the master and the
   * executors: the class path the class-data archive was made for comes first, as the JVM requires
   * (the runtime's jars hold Hadoop's defaults, never a site's settings).
   */
  static String classpath(YarnJob job) {
    // quoted: a staged runtime's class path is the container directory's "*", which the shell must not expand
    return "\"" + String.join(":", job.classpath()) + ":" + ApplicationConstants.Environment.HADOOP_CONF_DIR.$$()
        + "\"";
  }

  /** The master's credentials for the containers: the job token and delegation tokens, never the AMRMToken. */
  private static ByteBuffer containerTokens(Credentials credentials) throws IOException {
    Credentials copy = new Credentials(credentials);
    for (Iterator<Token<?>> it = copy.getAllTokens().iterator(); it.hasNext(); ) {
      if (it.next().getKind().toString().equals("YARN_AM_RM_TOKEN")) {
        it.remove();
      }
    }
    DataOutputBuffer out = new DataOutputBuffer();
    copy.writeTokenStorageToStream(out);
    return ByteBuffer.wrap(out.getData(), 0, out.getLength());
  }

  private static Resource resource(YarnJob.Resources resources) {
    Resource resource = Resource.newInstance(resources.memoryMb(), resources.vcores());
    if (resources.gpus() > 0) {
      resource.setResourceValue("yarn.io/gpu", resources.gpus());
    }
    return resource;
  }

  /** One priority per task type (YARN-7631: a request's priority tells which type a container is for). */
  static int priority(TaskType type) {
    return type.ordinal() + 1;
  }

  static TaskType typeOf(int priority) {
    int ordinal = priority - 1;
    return ordinal >= 0 && ordinal < TaskType.values().length ? TaskType.values()[ordinal] : null;
  }

}
