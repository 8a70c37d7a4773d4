package io.muster.yarn;

import io.grpc.StatusRuntimeException;
import io.muster.cluster.HostPort;
import io.muster.cluster.TaskId;
import io.muster.cluster.TaskType;
import io.muster.internal.rpc.ChannelCache;
import io.muster.internal.rpc.TaskServer;
import io.muster.launch.Attempt;
import io.muster.launch.GangEndpoint;
import io.muster.launch.GangSpec;
import io.muster.proto.gang.AwaitNextAttemptRequest;
import io.muster.proto.gang.GangServiceGrpc;
import io.muster.proto.gang.TaskRef;
import io.muster.rpc.JobToken;
import io.muster.rpc.Security;
import java.io.File;
import java.io.InputStream;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.URI;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Clock;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.Callable;
import java.util.concurrent.TimeUnit;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.security.Credentials;
import org.apache.hadoop.security.UserGroupInformation;
import org.apache.hadoop.yarn.api.records.Container;
import org.apache.hadoop.yarn.api.records.ContainerId;
import org.apache.hadoop.yarn.api.records.ContainerLaunchContext;
import org.apache.hadoop.yarn.api.records.NodeId;
import org.apache.hadoop.yarn.api.records.Priority;
import org.apache.hadoop.yarn.client.api.AMRMClient;
import org.apache.hadoop.yarn.client.api.AMRMClient.ContainerRequest;
import org.apache.hadoop.yarn.client.api.NMClient;
import org.apache.hadoop.yarn.conf.YarnConfiguration;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * What {@link ExecutorArchive} records, in one JVM against no cluster: the master's start (its
 * configuration and login, its ResourceManager client up to a registration and an ask that find
 * nobody there, its NodeManager client up to a container's launch that finds nobody either, its
 * status page) and one executor's whole run against the master's real {@link GangEndpoint}, its
 * command exiting at once. And the master's one call to itself while YARN allocates, so that the
 * executors' first calls find the serving path loaded.
 */
final class WarmUp {

  private static final Logger log = LoggerFactory.getLogger(WarmUp.class);
  private static final Duration CALL = Duration.ofSeconds(10);

  private WarmUp() {}

  /** The master's start, then an executor's run; the executor's exit code. */
  static int masterAndExecutor() throws Exception {
    master();
    return executor();
  }

  /** The warm-up's job: one worker, whose command exits at once. */
  static YarnJob job() {
    return YarnJob.builder().name("warm-up").gang(GangSpec.workers(1))
        .resources(Map.of(TaskType.WORKER, new YarnJob.Resources(128, 1, 0))).command("true").gangTimeout(CALL).build();
  }

  private static void master() throws Exception {
    Configuration conf = SiteConfiguration.decode(SiteConfiguration.encode(new YarnConfiguration()));
    UserGroupInformation.setConfiguration(conf);
    UserGroupInformation.getCurrentUser().getCredentials();
    int closedPort;
    try (ServerSocket closed = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
      closedPort = closed.getLocalPort();
    } // closed now: every call is refused at once
    Configuration nobody = ResourceManagerLink.clientConfiguration(conf);
    nobody.set(YarnConfiguration.RM_SCHEDULER_ADDRESS, "127.0.0.1:" + closedPort);
    nobody.setLong(YarnConfiguration.RESOURCEMANAGER_CONNECT_MAX_WAIT_MS, 0);
    nobody.setLong(YarnConfiguration.CLIENT_NM_CONNECT_MAX_WAIT_MS, 1); // its least: one retry, 1 ms later
    nobody.setLong(YarnConfiguration.CLIENT_NM_CONNECT_RETRY_INTERVAL_MS, 1);
    YarnJob job = job();
    AMRMClient<ContainerRequest> rm = AMRMClient.createAMRMClient();
    rm.init(nobody);
    rm.start();
    try {
      refused(() -> rm.registerApplicationMaster("127.0.0.1", 0, ""));
      rm.addContainerRequest(new ContainerRequest(ContainerLauncher.resource(job.resources().get(TaskType.WORKER)),
          null, null, Priority.newInstance(ContainerLauncher.priority(TaskType.WORKER)), true, null));
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
      Container container = Container.newInstance(id, node, "127.0.0.1:0", ContainerLauncher.resource(
          job.resources().get(TaskType.WORKER)), Priority.newInstance(ContainerLauncher.priority(TaskType.WORKER)),
          none);
      refused(() -> nm.startContainer(container, ContainerLaunchContext.newInstance(
          ContainerLauncher.localResources(job), Map.of(Handoff.JOB_ENV, job.toEnvironmentValue()), List.of("true"),
          null, ContainerLauncher.containerTokens(new Credentials()), null)));
    } finally {
      nm.stop();
    }
    try (StatusPage page = new StatusPage("127.0.0.1", () -> Map.of("state", "warm-up"));
        InputStream in = URI.create(page.url() + "status.json").toURL().openStream()) {
      in.readAllBytes();
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
   * One executor's run, as in a container, against a master's endpoint in this JVM, with a command
   * that exits at once; its exit code. The job's token goes through a credentials file, as YARN hands it.
   */
  static int executor() throws Exception {
    JobToken token = JobToken.random();
    Credentials credentials = new Credentials();
    Handoff.putToken(credentials, token.value());
    File tokens = File.createTempFile("muster-warm-up", ".tokens", new File("."));
    try {
      credentials.writeTokenStorageFile(new org.apache.hadoop.fs.Path(tokens.toURI()), new Configuration(false));
      token = Handoff.token(Credentials.readTokenStorageFile(tokens, new Configuration(false))).orElseThrow();
    } finally {
      Files.deleteIfExists(tokens.toPath());
    }
    YarnJob job = YarnJob.fromEnvironmentValue(job().toEnvironmentValue());
    Security security = Security.of(token);
    TaskRef ref = TaskRef.newBuilder().setJob(TaskType.WORKER.jobName()).setIndex(0).setContainerId("warm-up").build();
    try (TaskServer master = TaskServer.start(new TaskId("master", 0), new HostPort("127.0.0.1", 0), security);
        GangEndpoint endpoint = new GangEndpoint("container", new GangEndpoint.Launcher() { });
        ChannelCache channels = new ChannelCache(security)) {
      master.addService(endpoint);
      endpoint.start(new Attempt(0, job.gang(), CALL, job.preemption().savedExitCode(), Clock.systemUTC()));
      return TaskExecutor.run(channels.get(master.address()), master.address(), ref, job, security, "127.0.0.1")
          .exitCode();
    }
  }

  /**
   * One call to the master's own endpoint, refused as from no attempt, while YARN allocates and
   * launches the containers: the executors' first calls then find the serving path loaded and
   * compiled, instead of all waiting on it at once.
   */
  static void callSelfInBackground(HostPort self, Security security) {
    Thread warmUp = new Thread(() -> {
      try (ChannelCache channels = new ChannelCache(security)) {
        GangServiceGrpc.newBlockingStub(channels.get(self)).withDeadlineAfter(CALL.toMillis(), TimeUnit.MILLISECONDS)
            .awaitNextAttempt(AwaitNextAttemptRequest.newBuilder().setTask(TaskRef.newBuilder()
                .setJob(TaskType.WORKER.jobName()).setAttempt(-1).setContainerId("warm-up")).build());
      } catch (StatusRuntimeException e) {
        log.debug("the warm-up call was answered: {}", e.getStatus()); // FAILED_PRECONDITION: no such attempt
      }
    }, "muster-warm-up");
    warmUp.setDaemon(true);
    warmUp.start();
  }
}
