package io.muster.yarn;

import io.muster.internal.Json;
import io.muster.cluster.TaskType;
import io.muster.rpc.JobToken;
import io.muster.rpc.TlsFiles;
import java.io.IOException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.ByteBuffer;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.EnumSet;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import java.util.function.Consumer;
import java.util.stream.Collectors;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.io.DataOutputBuffer;
import org.apache.hadoop.io.Text;
import org.apache.hadoop.security.Credentials;
import org.apache.hadoop.security.UserGroupInformation;
import org.apache.hadoop.yarn.api.records.ApplicationId;
import org.apache.hadoop.yarn.api.records.ApplicationReport;
import org.apache.hadoop.yarn.api.records.ApplicationSubmissionContext;
import org.apache.hadoop.yarn.api.records.ApplicationTimeoutType;
import org.apache.hadoop.yarn.api.records.ContainerLaunchContext;
import org.apache.hadoop.yarn.api.records.NodeReport;
import org.apache.hadoop.yarn.api.records.NodeState;
import org.apache.hadoop.yarn.api.records.Resource;
import org.apache.hadoop.yarn.api.records.YarnApplicationState;
import org.apache.hadoop.yarn.client.ClientRMProxy;
import org.apache.hadoop.yarn.client.api.YarnClient;
import org.apache.hadoop.yarn.client.api.YarnClientApplication;
import org.apache.hadoop.yarn.client.util.YarnClientUtils;
import org.apache.hadoop.yarn.conf.YarnConfiguration;
import org.apache.hadoop.yarn.exceptions.YarnException;
import org.apache.hadoop.yarn.util.ConverterUtils;

/**
 * Submits a {@link YarnJob} to YARN and follows it: the client side of {@code muster submit}.
 * A fresh job token is made for every submission and travels only in the containers'
 * credentials. Muster's runtime ({@link YarnJob#classpath()}, this machine's jars and class
 * directories) is either used where it is, which is right when every NodeManager sees the same
 * paths (an in-process cluster, a shared installation), or staged: each entry copied once, by
 * content, to {@code <home>/.muster/lib/} on the cluster's file system and localized into every
 * container, so later submissions upload nothing that has not changed. On a Kerberos cluster it
 * needs this user's ticket, and gives the job delegation tokens in its place.
 */
public final class MusterClient implements AutoCloseable {

  /**
   * Whether a runtime used where it is gets a class-data archive for its executors (true by
   * default; false starts them as before): {@link ExecutorArchive}.
   */
  public static final String EXECUTOR_ARCHIVE = "muster.yarn.executor.class-data-archive";
  /**
   * Whether a failed attempt's containers run the next attempt (true by default): an executor whose
   * container lives waits for the next attempt instead of exiting, and the master asks YARN only
   * for the containers that were lost, stopped, on a node left out, or named for preemption; false
   * asks YARN for a whole new gang each attempt. Read by the ApplicationMaster.
   */
  public static final String KEEP_CONTAINERS = "muster.yarn.restart.keep-containers";
  /** The ApplicationMaster's container. */
  static final Resource MASTER = Resource.newInstance(512, 1);
  /** How many times YARN starts the master: once more after it is lost. */
  static final int MASTER_ATTEMPTS = 2;
  private static final Duration POLL = Duration.ofMillis(250);
  private static final EnumSet<YarnApplicationState> FINAL = EnumSet.of(YarnApplicationState.FINISHED,
      YarnApplicationState.FAILED, YarnApplicationState.KILLED);

  private final YarnClient yarn;
  private final Configuration conf;
  private final String site;
  private final boolean stageRuntime;
  /** The ResourceManager's principal, which renews the job's delegation tokens; null without Kerberos. */
  private final String renewer;
  private final HttpClient http = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(2)).build();
  /**
   * The log levels this client's environment sets, which its jobs' containers take
   * ({@link ContainerLogging#LEVELS}).
   */
  private final Map<String, String> logLevels;
  /** The TLS material {@code MUSTER_TLS_*} names in this client's environment, which its jobs serve and call with. */
  private final Optional<TlsFiles> tls;

  /** A client that uses the runtime where it is (every NodeManager sees this machine's paths). */
  public MusterClient(Configuration conf) throws IOException {
    this(conf, false);
  }

  /**
   * @param stageRuntime whether to stage the runtime's jars on the cluster's file system
   * @throws IOException when the cluster uses Kerberos and this user has neither a ticket nor tokens
   * @throws IllegalArgumentException when {@code MUSTER_TLS_*} names TLS material that cannot be used
   */
  public MusterClient(Configuration conf, boolean stageRuntime) throws IOException {
    this(conf, stageRuntime, System.getenv());
  }

  /**
   * A client whose jobs' containers log at the levels {@code environment} sets, and use the TLS
   * material it names, as if it were this process's.
   */
  MusterClient(Configuration conf, boolean stageRuntime, Map<String, String> environment) throws IOException {
    this.conf = conf;
    logLevels = ContainerLogging.levels(environment);
    tls = TlsFiles.fromEnvironment(environment);
    renewer = kerberosRenewer(conf);
    this.stageRuntime = stageRuntime;
    site = SiteConfiguration.encode(conf);
    yarn = YarnClient.createYarnClient();
    yarn.init(conf);
    yarn.start();
  }

  /**
   * Submits the job; returns once YARN has accepted it. Shipped files are first copied to
   * {@code <home>/.muster/<application id>/} on the cluster's file system, which the master deletes
   * when the job ends.
   */
  public ApplicationId submit(YarnJob job) throws IOException, YarnException {
    YarnClientApplication app = yarn.createApplication();
    checkFits(job, app.getNewApplicationResponse().getMaximumResourceCapability(),
        yarn.getNodeReports(NodeState.RUNNING));
    ApplicationSubmissionContext context = app.getApplicationSubmissionContext();
    Optional<java.nio.file.Path> executorArchive = Optional.empty();
    if (!stageRuntime) { // used where it is: the jars keep the times the archive was made against
      ExecutorArchive.Prepared runtime = ExecutorArchive.prepare(conf, job.classpath(), ExecutorArchive.defaultCache());
      job = job.withClasspath(runtime.classpath());
      executorArchive = runtime.archive();
    }
    job = stage(job, context.getApplicationId());
    context.setApplicationName(job.name());
    context.setQueue(job.queue());
    context.setApplicationType("MUSTER");
    // The master restarts the gang itself; YARN restarts a lost master once (its containers are ended with it,
    // and the new master starts the gang again).
    context.setMaxAppAttempts(MASTER_ATTEMPTS);
    context.setResource(MASTER);
    job.placement().nodeLabel().ifPresent(context::setNodeLabelExpression);
    job.placement().lifetime().ifPresent(lifetime ->
        context.setApplicationTimeouts(Map.of(ApplicationTimeoutType.LIFETIME, lifetime.toSeconds())));
    String command = ContainerLauncher.javaCommand(ExecutorArchive.MASTER_JVM_FLAGS,
        executorArchive.map(Object::toString), job, ApplicationMaster.class, "");
    Map<String, String> environment = new HashMap<>(logLevels);
    environment.putAll(Map.of(Handoff.JOB_ENV, job.toEnvironmentValue(), SiteConfiguration.ENV, site));
    executorArchive.ifPresent(archive -> environment.put(ExecutorArchive.ENV, archive.toString()));
    context.setAMContainerSpec(ContainerLaunchContext.newInstance(ContainerLauncher.localResources(job),
        environment, List.of(command), null, credentials(job, JobToken.random().value()), null));
    yarn.submitApplication(context);
    return context.getApplicationId();
  }

  /**
   * Refuses, before anything is staged or submitted, a gang the cluster could never run even when
   * idle: a container larger than the scheduler's maximum allocation or than every running node
   * (of the job's node label, where it has one), or a gang and its master larger than all those
   * nodes together. GPUs are left to the scheduler.
   *
   * @throws IllegalStateException saying what was asked for, what the cluster has and what to do
   */
  static void checkFits(YarnJob job, Resource maximum, List<NodeReport> nodes) {
    List<NodeReport> eligible = nodes.stream().filter(n -> job.placement().nodeLabel()
        .map(label -> n.getNodeLabels().contains(label)).orElse(true)).toList();
    long nodeMb = eligible.stream().mapToLong(n -> n.getCapability().getMemorySize()).max().orElse(Long.MAX_VALUE);
    long nodeVcores = eligible.stream().mapToLong(n -> n.getCapability().getVirtualCores()).max()
        .orElse(Long.MAX_VALUE);
    long totalMb = MASTER.getMemorySize();
    for (TaskType type : job.gang().types()) {
      YarnJob.Resources r = job.resources().get(type);
      String asked = "the " + type.jobName() + " containers ask for " + r.memoryMb() + " MB and " + r.vcores()
          + " vcore" + (r.vcores() == 1 ? "" : "s");
      String option = " (--" + type.jobName() + "-memory, --" + type.jobName() + "-vcores)";
      if (r.memoryMb() > maximum.getMemorySize() || r.vcores() > maximum.getVirtualCores()) {
        // the scheduler's maximum is its configured one, or, once it has run a while, its largest node's where smaller
        throw new IllegalStateException(asked + ", more than the cluster's largest container (" + maximum.getMemorySize()
            + " MB, " + maximum.getVirtualCores() + " vcores: yarn.scheduler.maximum-allocation-mb and -vcores, or its "
            + "largest node's where smaller); ask for less" + option);
      }
      if (r.memoryMb() > nodeMb || r.vcores() > nodeVcores) {
        throw new IllegalStateException(asked + ", more than any of the " + eligible.size() + " running nodes"
            + job.placement().nodeLabel().map(l -> " labelled " + l).orElse("") + " has (the largest: " + nodeMb
            + " MB, " + nodeVcores + " vcores); ask for less" + option);
      }
      totalMb += (long) r.memoryMb() * job.gang().count(type);
    }
    long clusterMb = eligible.stream().mapToLong(n -> n.getCapability().getMemorySize()).sum();
    if (!eligible.isEmpty() && totalMb > clusterMb) {
      throw new IllegalStateException("the gang's containers and its master need " + totalMb + " MB at once, "
          + "more than the " + eligible.size() + " running nodes" + job.placement().nodeLabel().map(l -> " labelled "
          + l).orElse("") + " have together (" + clusterMb + " MB); ask for fewer or smaller containers");
    }
  }

  /**
   * Follows the application until it ends or {@code limit} passes, telling {@code progress} each
   * change of state, and while it runs each change of its gang as the master's status page shows it
   * ({@code attempt 1: 1 chief running; 1 worker running, 1 worker starting}): counts before the
   * task type, so that they do not read as a task's index; returns the last report.
   */
  public ApplicationReport follow(ApplicationId id, Duration limit, Consumer<String> progress)
      throws IOException, YarnException, InterruptedException {
    Instant deadline = Instant.now().plus(limit);
    String last = null;
    String lastGang = null;
    while (true) {
      ApplicationReport report = yarn.getApplicationReport(id);
      String url = openableUrl(report);
      String state = report.getYarnApplicationState() + (url.isBlank() ? "" : " (" + url + ")");
      if (!Objects.equals(state, last)) {
        progress.accept(id + " " + state);
        last = state;
      }
      if (report.getYarnApplicationState() == YarnApplicationState.RUNNING) {
        String gang = gangProgress(report.getOriginalTrackingUrl()).orElse(lastGang);
        if (gang != null && !gang.equals(lastGang)) {
          progress.accept(id + " " + gang);
          lastGang = gang;
        }
      }
      if (FINAL.contains(report.getYarnApplicationState()) || Instant.now().isAfter(deadline)) {
        return report;
      }
      Thread.sleep(POLL.toMillis());
    }
  }

  /**
   * What {@code muster status} says: while the application runs, its state, the page to open and
   * the gang's progress; once it is over, its final status and the master's diagnostics.
   */
  public String describe(ApplicationId id) throws IOException, YarnException {
    ApplicationReport report = yarn.getApplicationReport(id);
    if (FINAL.contains(report.getYarnApplicationState())) {
      return id + " " + report.getFinalApplicationStatus() + (report.getDiagnostics().isBlank() ? ""
          : ": " + report.getDiagnostics().replace("\n", "\n  "));
    }
    String url = openableUrl(report);
    return id + " " + report.getYarnApplicationState() + (url.isBlank() ? "" : " (" + url + ")")
        + gangProgress(report.getOriginalTrackingUrl()).map(gang -> "; " + gang).orElse("");
  }

  /**
   * The page a user can open: YARN's proxy, or, while the master runs, its own page where the proxy
   * has no port (an embedded cluster's web server binds port 0, which the ResourceManager then writes
   * into the URL).
   */
  static String openableUrl(ApplicationReport report) {
    String proxy = Objects.toString(report.getTrackingUrl(), "");
    if (!proxy.matches("https?://[^/]*:0/.*")) {
      return proxy;
    }
    String own = Objects.toString(report.getOriginalTrackingUrl(), "");
    // "N/A" until the master registers; gone with it once the application is over
    return own.startsWith("http") && !FINAL.contains(report.getYarnApplicationState()) ? own : "";
  }

  /** The gang's state from the master's {@code status.json}; empty while the page cannot be read. */
  @SuppressWarnings("unchecked")
  private Optional<String> gangProgress(String trackingUrl) {
    if (trackingUrl == null || !trackingUrl.startsWith("http")) {
      return Optional.empty();
    }
    try {
      HttpResponse<String> response = http.send(HttpRequest.newBuilder(URI.create(trackingUrl + "status.json"))
          .timeout(Duration.ofSeconds(2)).build(), HttpResponse.BodyHandlers.ofString());
      Map<String, Object> status = (Map<String, Object>) Json.parse(response.body());
      Map<String, Map<String, Integer>> byType = new LinkedHashMap<>();
      for (Map<String, Object> task : (List<Map<String, Object>>) status.get("tasks")) {
        byType.computeIfAbsent((String) task.get("type"), t -> new LinkedHashMap<>())
            .merge((String) task.get("state"), 1, Integer::sum);
      }
      if (byType.isEmpty()) {
        return Optional.empty();
      }
      return Optional.of("attempt " + status.get("attempt") + ": " + byType.entrySet().stream()
          .map(e -> e.getValue().entrySet().stream().map(s -> tasks(e.getKey(), s.getValue()) + " " + s.getKey())
              .collect(Collectors.joining(", ")))
          .collect(Collectors.joining("; "))
          + (status.get("lost_nodes") instanceof Map<?, ?> lost && !lost.isEmpty()
              ? " (lost nodes: " + String.join(", ", (java.util.Set<String>) lost.keySet()) + ")" : "")
          + (status.get("preemption") instanceof String notice ? "; " + notice + ": saving" : ""));
    } catch (IOException | RuntimeException e) {
      return Optional.empty(); // the page is not up yet, or the master is gone
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      return Optional.empty();
    }
  }

  /** {@code 1 worker}, {@code 2 workers}, {@code 2 ps} (TensorFlow's own plural). */
  static String tasks(String type, int count) {
    return count + " " + type + (count == 1 || type.equals("ps") ? "" : "s");
  }

  private YarnJob stage(YarnJob job, ApplicationId id) throws IOException {
    if (stageRuntime) {
      job = RuntimeStaging.stage(FileSystem.get(conf), job);
    }
    if (job.shipped().stream().allMatch(f -> f.size() > 0)) {
      return job;
    }
    FileSystem fs = FileSystem.get(conf);
    Path dir = stagingDir(fs, id.toString());
    List<YarnJob.Shipped> staged = new ArrayList<>();
    for (YarnJob.Shipped file : job.shipped()) {
      if (file.size() > 0) { // staged already (the runtime)
        staged.add(file);
        continue;
      }
      // under its own file name (YARN unpacks an archive by its extension), in a directory per link name
      Path source = new Path(URI.create(file.uri()));
      Path target = new Path(new Path(dir, file.name()), source.getName());
      fs.copyFromLocalFile(false, true, source, target);
      FileStatus status = fs.getFileStatus(target);
      staged.add(new YarnJob.Shipped(file.name(), fs.makeQualified(target).toUri().toString(), file.archive(),
          status.getLen(), status.getModificationTime()));
    }
    return job.withShipped(staged);
  }

  /** Where a job's shipped files are staged. */
  static Path stagingDir(FileSystem fs, String applicationId) {
    return new Path(new Path(fs.getHomeDirectory(), ".muster"), applicationId);
  }

  public ApplicationReport report(ApplicationId id) throws IOException, YarnException {
    return yarn.getApplicationReport(id);
  }

  public void kill(ApplicationId id) throws IOException, YarnException {
    yarn.killApplication(id);
  }

  @Override
  public void close() throws IOException {
    yarn.close();
  }

  /**
   * On a Kerberos cluster, the ResourceManager's principal; null elsewhere. A Kerberos cluster
   * answers only a user with a ticket (or delegation tokens) who knows the ResourceManager's
   * principal: say so before the first call fails deep in SASL.
   */
  private static String kerberosRenewer(Configuration conf) throws IOException {
    if (!UserGroupInformation.isSecurityEnabled()) {
      return null;
    }
    UserGroupInformation user = UserGroupInformation.getCurrentUser();
    if (!user.hasKerberosCredentials() && user.getCredentials().numberOfTokens() == 0) {
      throw new IOException("the cluster uses Kerberos (hadoop.security.authentication=kerberos) and "
          + user.getUserName() + " has no Kerberos ticket: run kinit (kinit -kt KEYTAB PRINCIPAL for a scheduled job), "
          + "then try again");
    }
    String principal = YarnClientUtils.getRmPrincipal(conf);
    if (principal == null || principal.isBlank()) {
      throw new IOException("the cluster uses Kerberos but " + YarnConfiguration.RM_PRINCIPAL + " is not set: "
          + "set it to the ResourceManager's principal in the yarn-site.xml of HADOOP_CONF_DIR");
    }
    return principal;
  }

  /**
   * The master's container's credentials: the job token and this user's tokens and, on a Kerberos
   * cluster, delegation tokens for the ResourceManager and for the file systems the job uses (the
   * staging one and the output directory's), which the master and every task use in place of a
   * ticket. The ResourceManager renews them while the application runs (up to the cluster's
   * maximum token lifetime, 7 days by default).
   */
  private ByteBuffer credentials(YarnJob job, String token) throws IOException, YarnException {
    Credentials credentials = new Credentials(UserGroupInformation.getCurrentUser().getCredentials());
    if (renewer != null) {
      List<FileSystem> fileSystems = new ArrayList<>(List.of(FileSystem.get(conf)));
      if (job.outputDir().isPresent()) {
        fileSystems.add(new Path(job.outputDir().get()).getFileSystem(conf));
      }
      for (FileSystem fs : fileSystems) {
        fs.addDelegationTokens(renewer, credentials); // none for a file system that has a token here already
      }
      org.apache.hadoop.yarn.api.records.Token rm = yarn.getRMDelegationToken(new Text(renewer));
      Text service = ClientRMProxy.getRMDelegationTokenService(conf);
      credentials.addToken(service, ConverterUtils.convertFromYarn(rm, service));
    }
    Handoff.putToken(credentials, token);
    if (tls.isPresent()) {
      Handoff.putTls(credentials, tls.get());
    }
    DataOutputBuffer out = new DataOutputBuffer();
    credentials.writeTokenStorageToStream(out);
    return ByteBuffer.wrap(out.getData(), 0, out.getLength());
  }
}
