package io.muster.yarn;

import io.muster.cluster.HostPort;
import io.muster.cluster.TaskId;
import io.muster.cluster.TaskType;
import io.muster.internal.rpc.TaskServer;
import io.muster.launch.Attempt;
import io.muster.launch.Attempts;
import io.muster.launch.GangEndpoint;
import io.muster.launch.Rerun;
import io.muster.rpc.JobToken;
import io.muster.rpc.Security;
import java.time.Clock;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Deque;
import java.util.EnumMap;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.ConcurrentSkipListMap;
import java.util.stream.Collectors;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.security.Credentials;
import org.apache.hadoop.security.UserGroupInformation;
import org.apache.hadoop.yarn.api.ApplicationConstants;
import org.apache.hadoop.yarn.api.protocolrecords.AllocateResponse;
import org.apache.hadoop.yarn.api.records.Container;
import org.apache.hadoop.yarn.api.records.ContainerExitStatus;
import org.apache.hadoop.yarn.api.records.ContainerId;
import org.apache.hadoop.yarn.api.records.ContainerStatus;
import org.apache.hadoop.yarn.api.records.FinalApplicationStatus;
import org.apache.hadoop.yarn.api.records.PreemptionMessage;
import org.apache.hadoop.yarn.api.records.Priority;
import org.apache.hadoop.yarn.client.api.AMRMClient;
import org.apache.hadoop.yarn.client.api.AMRMClient.ContainerRequest;
import org.apache.hadoop.yarn.client.api.NMClient;
import org.apache.hadoop.yarn.exceptions.YarnException;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Muster's YARN ApplicationMaster: it drives the launch core's {@link Attempt}s of the gang with
 * YARN's containers. For each attempt it asks for every container of the gang at once (one priority
 * per task type, so YARN never mixes them up), gives each allocated container the next index of its
 * type, releases surplus ones, and starts a {@link TaskExecutor} in each ({@link ContainerLauncher});
 * the executors meet the attempt through the {@link GangEndpoint} on the master's task server. What
 * YARN says goes to the attempt: a container that ended, a preemption notice. The <em>gang
 * deadline</em> covers allocation and joining: a gang not formed by then fails with what was
 * allocated, joined and missing. When the attempt has ended, every container still running is
 * ended, and the next attempt, as {@link Attempts} decides, runs in the failed attempt's containers
 * whose executors offer them (not those stopped, on a node left out, or named for preemption) and
 * asks YARN for the rest. The final status and diagnostics are {@link Attempts}' words.
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

  /** What the status page says of the job. */
  enum State { RUNNING, SUCCEEDED, FAILED }

  private final YarnJob job;
  /** YARN's attempt of this master: 1, or 2 when YARN restarted a master that was lost. */
  private final int masterAttempt;
  private final AMRMClient<ContainerRequest> rm;
  private final ContainerLauncher launcher;
  private final GangEndpoint endpoint;
  /** The containers YARN named in a preemption message: never kept for a next attempt. */
  private final Set<String> namedForPreemption = new HashSet<>();
  /** The nodes left out of the job's later attempts (YARN's blacklist), each with why. */
  private final Map<String, String> lostNodes = new ConcurrentSkipListMap<>();
  private volatile GangContainers current;
  private volatile State state = State.RUNNING;
  private volatile String diagnostics = "";

  private ApplicationMaster(YarnJob job, int masterAttempt, AMRMClient<ContainerRequest> rm, ContainerLauncher launcher,
      boolean keepContainers) {
    this.job = job;
    this.masterAttempt = masterAttempt;
    this.rm = rm;
    this.launcher = launcher;
    this.endpoint = new GangEndpoint("container", new ContainerOffers(keepContainers, () -> current));
  }

  public static void main(String[] args) throws Exception {
    if (args.length == 1 && args[0].equals(TaskExecutor.WARM_UP)) {
      System.exit(WarmUp.masterAndExecutor());
    }
    YarnJob job = Handoff.job();
    Configuration conf = SiteConfiguration.decode(System.getenv(SiteConfiguration.ENV));
    // the client's security settings (Kerberos) over the node's, like the rest of its configuration
    UserGroupInformation.setConfiguration(conf);
    Credentials credentials = UserGroupInformation.getCurrentUser().getCredentials();
    JobToken token = Handoff.token(credentials).orElseThrow(() -> new IllegalStateException(
        "the job token is not in the master's credentials; submit with muster submit"));
    Security security = Handoff.security(token, credentials, java.nio.file.Path.of("").toAbsolutePath());
    AMRMClient<ContainerRequest> rm = AMRMClient.createAMRMClient();
    rm.init(ResourceManagerLink.clientConfiguration(conf));
    rm.start();
    NMClient nm = NMClient.createNMClient();
    nm.init(conf);
    nm.start();
    String host = System.getenv(ApplicationConstants.Environment.NM_HOST.name());
    ContainerId self = ContainerId.fromString(System.getenv(ApplicationConstants.Environment.CONTAINER_ID.name()));
    try (TaskServer server = TaskServer.start(new TaskId("master", 0), new HostPort(host, 0), security)) {
      WarmUp.callSelfInBackground(server.address(), security);
      ContainerLauncher launcher = new ContainerLauncher(nm, job, server.address(),
          ContainerLauncher.containerTokens(credentials), Optional.ofNullable(System.getenv(ExecutorArchive.ENV))
              .filter(path -> !path.isBlank()), ContainerLogging.levels(System.getenv()));
      ApplicationMaster master = new ApplicationMaster(job, self.getApplicationAttemptId().getAttemptId(), rm,
          launcher, conf.getBoolean(MusterClient.KEEP_CONTAINERS, true));
      server.addService(master.endpoint);
      try (StatusPage page = new StatusPage(host, master::status); launcher; GangEndpoint ignored = master.endpoint) {
        rm.registerApplicationMaster(host, server.port(), page.url());
        log.info("registered with the ResourceManager{}; serving the executors at {}{}", TaskExecutor.startCost(),
            server.address(), security.tls().isPresent() ? " (TLS)" : "");
        Attempts.Done done;
        try {
          done = master.run();
        } catch (ResourceManagerLink.Lost e) {
          // nobody is left to report to: end what this master started, and go
          log.error("{}; ending the job's containers and exiting", e.getMessage());
          master.current.running().forEach(h -> launcher.stop(h.container()));
          launcher.close();
          System.exit(1);
          return;
        }
        FinalApplicationStatus status = done.succeeded() ? FinalApplicationStatus.SUCCEEDED
            : FinalApplicationStatus.FAILED;
        log.info("the job {}: {}", status, done.summary());
        master.state = done.succeeded() ? State.SUCCEEDED : State.FAILED;
        master.diagnostics = done.summary();
        RuntimeStaging.deleteStagedFiles(conf, job, self.getApplicationAttemptId().getApplicationId().toString());
        rm.unregisterApplicationMaster(status, done.summary(), page.url());
      }
    } finally {
      nm.stop();
      rm.stop();
    }
  }

  /** What the status page shows now. */
  Map<String, Object> status() {
    GangContainers containers = current;
    return StatusPage.describe(job, containers == null ? null : containers.attempt(), state.name(), diagnostics,
        lostNodes);
  }

  /** Runs attempts until the job succeeds or {@link Attempts} gives up. */
  Attempts.Done run() throws YarnException, InterruptedException {
    Attempts attempts = new Attempts(job.maxAttempts(), job.rerun(), Rerun.notRerun("--rerun "
        + Rerun.ANY_FAILURE.optionValue()));
    if (masterAttempt > 1) {
      String lost = "the master was lost and YARN started it again (master attempt " + masterAttempt + "); the gang "
          + "starts over with MUSTER_ATTEMPT counting on, so commands resume from their backups";
      attempts.earlier(lost);
      log.warn("{}", lost);
    }
    try {
      while (true) {
        // a restarted master numbers its attempts after every number the lost one could have used
        Attempt attempt = new Attempt((masterAttempt - 1) * (job.maxAttempts() + Attempts.UNCOUNTED_LIMIT)
            + attempts.number(), job.gang(),
            job.gangTimeout(), job.preemption().savedExitCode(), Clock.systemUTC());
        GangContainers containers = new GangContainers(attempt);
        Map<GangContainers.Held, GangContainers.Offer> kept = current == null ? Map.of() : keepOffered(current,
            containers);
        current = containers;
        endpoint.start(attempt);
        kept.forEach((held, offer) -> offer.accept(held.task(), attempt.number()));
        Attempt.Outcome outcome = runAttempt(containers);
        Attempts.Next next = attempts.after(outcome);
        if (next instanceof Attempts.Done done) {
          return done;
        }
        Attempts.RunAgain again = (Attempts.RunAgain) next;
        diagnostics = again.line();
        log.warn("{}", again.logLine());
      }
    } finally {
      if (current != null) {
        current.declineOffers("no attempt follows");
      }
    }
  }

  /**
   * Gives {@code next} the containers of {@code ended} whose executors offered them and are still
   * waiting, each for the task it ran, except those stopped, on a node left out, or named for
   * preemption: their executors are told to exit. The caller answers the kept ones' offers once
   * {@code next} is the endpoint's attempt.
   */
  private Map<GangContainers.Held, GangContainers.Offer> keepOffered(GangContainers ended, GangContainers next) {
    Map<GangContainers.Held, GangContainers.Offer> kept = new LinkedHashMap<>();
    ended.offered().forEach((held, offer) -> {
      String refused = launcher.stopping(held.id()) ? "the master stopped its container"
          : lostNodes.containsKey(held.host()) ? held.host() + " is left out of the job's attempts"
          : namedForPreemption.contains(held.id()) ? "YARN named its container for preemption"
          : !offer.waiting() ? "its executor stopped waiting" : null;
      if (refused == null) {
        next.attempt().keep(held.task(), held.placement());
        next.add(held.task(), held.container());
        kept.put(held, offer);
      } else {
        offer.decline(refused);
      }
    });
    if (!kept.isEmpty()) {
      log.info("{}: keeping {} of {}'s containers: {}", next.attempt(), kept.size(), ended.attempt(), kept.keySet().stream().map(h -> h.task() + " in " + h.id())
              .collect(Collectors.joining(", ")));
    }
    return kept;
  }

  private Attempt.Outcome runAttempt(GangContainers containers) throws YarnException, InterruptedException {
    Attempt attempt = containers.attempt();
    Map<TaskType, Deque<ContainerRequest>> outstanding = ask(attempt);
    Instant endingSince = null;
    boolean ended = false;
    while (true) {
      AllocateResponse response = ResourceManagerLink.allocate(rm);
      for (Container container : response.getAllocatedContainers()) {
        allocated(containers, container, outstanding);
      }
      PreemptionMessage preemption = response.getPreemptionMessage();
      if (preemption != null) {
        preemptionAnnounced(containers, GangContainers.named(preemption));
      }
      for (ContainerStatus status : response.getCompletedContainersStatuses()) {
        completed(containers, status);
      }
      if (!attempt.ended() && attempt.formationOverdue()) {
        notFormed(containers);
      }
      if (attempt.ended() && !ended) {
        ended = true;
        outstanding.values().forEach(requests -> requests.forEach(rm::removeContainerRequest));
        outstanding.clear();
        attempt.outcome().filter(o -> o instanceof Attempt.Failed failed && !failed.silent().isEmpty())
            .ifPresent(o -> silenced(containers, (Attempt.Failed) o));
        attempt.outcome().filter(o -> o instanceof Attempt.Failed)
            .ifPresent(o -> log.warn("{}: {}", attempt, ((Attempt.Failed) o).report()));
      }
      if (ended) {
        endingSince = endingSince == null ? Instant.now() : endingSince;
        if (containers.allDoneOrOffered()) {
          return attempt.outcome().orElseThrow();
        }
        // Executors end their commands when told, and those waiting for a gang that will not form are told at
        // once; the containers whose executors do not answer are stopped; a container whose node does not
        // confirm the stop either (a node cut off) is released, and YARN reports it ended.
        if (Instant.now().isAfter(endingSince.plus(END_GRACE))) {
          containers.toEnd().forEach(h -> launcher.stop(h.container()));
        } else if (!attempt.isFormed()) {
          containers.running(task -> attempt.missing().contains(task)).forEach(h -> launcher.stop(h.container()));
        }
        if (Instant.now().isAfter(endingSince.plus(END_GRACE).plus(END_GRACE))) {
          release(containers, containers.toEnd(), "did not end when stopped");
        }
      }
      boolean allocating = outstanding.values().stream().anyMatch(requests -> !requests.isEmpty());
      Thread.sleep((allocating ? ALLOCATION_POLL : POLL).toMillis());
    }
  }

  /** Asks YARN for every container of the gang that the attempt does not have yet (kept ones it has). */
  private Map<TaskType, Deque<ContainerRequest>> ask(Attempt attempt) {
    Map<TaskType, Deque<ContainerRequest>> outstanding = new EnumMap<>(TaskType.class);
    for (TaskType type : job.gang().types()) {
      Deque<ContainerRequest> requests = new ArrayDeque<>();
      for (int i = attempt.placed(type); i < job.gang().count(type); i++) {
        ContainerRequest request = new ContainerRequest(ContainerLauncher.resource(job.resources().get(type)), null,
            null, Priority.newInstance(ContainerLauncher.priority(type)), true,
            job.placement().nodeLabel().orElse(null));
        rm.addContainerRequest(request);
        requests.add(request);
      }
      outstanding.put(type, requests);
    }
    log.info("{}: asking YARN for the gang ({}) within {}", attempt, job.gang(),
        io.muster.internal.Durations.words(job.gangTimeout()));
    return outstanding;
  }

  private void allocated(GangContainers containers, Container container, Map<TaskType, Deque<ContainerRequest>> asked) {
    Attempt attempt = containers.attempt();
    TaskType type = ContainerLauncher.typeOf(container.getPriority().getPriority());
    Optional<TaskId> task = type == null || attempt.ended() ? Optional.empty()
        : attempt.assign(type, GangContainers.Held.placement(container));
    if (task.isEmpty()) {
      rm.releaseAssignedContainer(container.getId());
      return;
    }
    rm.removeContainerRequest(asked.get(type).poll());
    containers.add(task.get(), container);
    log.info("{}: {} runs in container {} on {}", attempt, task.get(), container.getId(),
        container.getNodeId().getHost());
    launcher.start(container, task.get(), attempt.number(), why -> attempt.abort(Attempt.Kind.CLUSTER, why));
  }

  /** YARN will take the named containers: a notice for the attempt's tasks among them. */
  private void preemptionAnnounced(GangContainers containers, Set<String> named) {
    namedForPreemption.addAll(named);
    Map<TaskId, String> detail = new LinkedHashMap<>();
    containers.running().stream().filter(h -> named.contains(h.id()))
        .forEach(h -> detail.put(h.task(), "container " + h.id() + " on " + h.host()));
    if (!detail.isEmpty()) {
      Attempt attempt = containers.attempt();
      attempt.notice(detail).ifPresent(notice -> log.warn("{}: {}; {}", attempt, notice,
          attempt.isFormed() ? "every task is sent SIG" + job.preemption().signal() + " to save; the attempt ends once "
              + "they have exited" : "the gang has not formed: ending the attempt"));
    }
  }

  private void completed(GangContainers containers, ContainerStatus status) {
    String id = status.getContainerId().toString();
    containers.completed(id).ifPresent(task -> {
      int exit = status.getExitStatus();
      log.info("{}: {}'s container {} ended (exit status {})", containers.attempt(), task, id,
          exit);
      // preempted, or its node was lost: YARN took it away, not the job's failure
      containers.attempt().gone(task, exit, status.getDiagnostics(), exit == ContainerExitStatus.PREEMPTED
          || exit == ContainerExitStatus.ABORTED);
    });
  }

  /**
   * The gang did not form by its deadline: says, per type, what was allocated and joined, on which
   * nodes, and what the node of each container that never joined answers. A gang the cluster gave
   * some containers that never joined may fit elsewhere the next time; one it gave none would not.
   */
  private void notFormed(GangContainers containers) {
    Attempt attempt = containers.attempt();
    List<TaskId> missing = attempt.missing();
    List<GangContainers.Held> unjoined = containers.running(missing::contains);
    Map<String, ContainerLauncher.NodeAnswer> answers = launcher.probe(unjoined.stream()
        .map(GangContainers.Held::container).toList());
    List<String> parts = new ArrayList<>();
    for (TaskType type : job.gang().types()) {
      long joined = job.gang().count(type) - missing.stream().filter(t -> t.is(type)).count();
      parts.add(type.jobName() + " " + attempt.placed(type) + "/" + job.gang().count(type) + " allocated, " + joined
          + "/" + job.gang().count(type) + " registered");
    }
    List<String> accounts = new ArrayList<>();
    for (TaskId task : missing) {
      Optional<GangContainers.Held> held = unjoined.stream().filter(h -> h.task().equals(task)).findFirst();
      accounts.add(held.map(h -> task + " (container " + h.id() + " on " + h.host() + " never registered"
          + Optional.ofNullable(answers.get(h.id())).map(a -> "; " + a).orElse("") + ")")
          .orElse(task + " (no container)"));
    }
    String nodes = containers.running().stream().map(GangContainers.Held::host).distinct().sorted()
        .collect(Collectors.joining(", "));
    attempt.notFormed(String.join("; ", parts) + (nodes.isEmpty() ? "" : "; nodes: " + nodes) + "; missing: "
        + String.join(", ", accounts), !unjoined.isEmpty());
    // a container on a node that does not answer would not confirm a stop either: YARN reports it ended
    release(containers, unjoined.stream().filter(h -> !answers.get(h.id()).answers()).toList(),
        "is on a node that does not answer");
  }

  /**
   * The attempt ended because executors went silent: their containers are stopped, or, where the
   * NodeManager does not answer either (the node is down or cut off), released (YARN reports them
   * ended) and their nodes left out of the job's later attempts.
   */
  private void silenced(GangContainers containers, Attempt.Failed failed) {
    List<GangContainers.Held> silent = containers.running(task -> failed.silent().stream()
        .anyMatch(s -> s.task().equals(task)));
    Map<String, ContainerLauncher.NodeAnswer> answers = launcher.probe(silent.stream()
        .map(GangContainers.Held::container).toList());
    Map<TaskId, String> detail = new HashMap<>();
    List<String> cutOff = new ArrayList<>();
    for (GangContainers.Held h : silent) {
      ContainerLauncher.NodeAnswer node = answers.get(h.id());
      detail.put(h.task(), node.toString());
      if (!node.answers() && !cutOff.contains(h.host())) {
        cutOff.add(h.host());
        lostNodes.put(h.host(), containers.attempt() + ": " + h.task() + "'s executor "
            + "went silent, and " + node);
      }
    }
    containers.attempt().explainSilence(detail, cutOff.isEmpty() ? "" : "; " + String.join(", ", cutOff)
        + " left out of the job's next attempts", cutOff.isEmpty() ? "an executor went silent" : "a node went silent");
    if (!cutOff.isEmpty()) {
      rm.updateBlacklist(cutOff, List.of());
    }
    release(containers, silent.stream().filter(h -> cutOff.contains(h.host())).toList(), "is on a node cut off");
    silent.stream().filter(h -> !cutOff.contains(h.host())).forEach(h -> launcher.stop(h.container()));
  }

  private void release(GangContainers containers, List<GangContainers.Held> held, String why) {
    for (GangContainers.Held h : held) {
      log.warn("{}: container {} on {} {}; releasing it", containers.attempt(), h.id(),
          h.host(), why);
      rm.releaseAssignedContainer(h.container().getId());
      containers.released(h.id());
    }
  }
}
