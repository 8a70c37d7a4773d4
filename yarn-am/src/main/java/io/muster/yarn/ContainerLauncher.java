package io.muster.yarn;

import io.muster.cluster.HostPort;
import io.muster.cluster.TaskId;
import io.muster.cluster.TaskType;
import io.muster.internal.rpc.Reachability;
import java.io.IOException;
import java.net.URI;
import java.nio.ByteBuffer;
import java.time.Duration;
import java.util.Collection;
import java.util.HashMap;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.function.Consumer;
import org.apache.hadoop.io.DataOutputBuffer;
import org.apache.hadoop.security.Credentials;
import org.apache.hadoop.security.token.Token;
import org.apache.hadoop.yarn.api.ApplicationConstants;
import org.apache.hadoop.yarn.api.records.Container;
import org.apache.hadoop.yarn.api.records.ContainerLaunchContext;
import org.apache.hadoop.yarn.api.records.LocalResource;
import org.apache.hadoop.yarn.api.records.LocalResourceType;
import org.apache.hadoop.yarn.api.records.LocalResourceVisibility;
import org.apache.hadoop.yarn.api.records.Resource;
import org.apache.hadoop.yarn.api.records.URL;
import org.apache.hadoop.yarn.client.api.NMClient;
import org.apache.hadoop.yarn.exceptions.YarnException;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * How the ApplicationMaster starts, stops and probes its containers: the launch context of a
 * {@link TaskExecutor} (its command, class path, shipped files, environment and credentials), and
 * the NodeManagers' calls, made off the master's loop because a node that does not answer holds a
 * call for minutes.
 */
final class ContainerLauncher implements AutoCloseable {

  private static final Logger log = LoggerFactory.getLogger(ContainerLauncher.class);
  private static final Duration NODE_PROBE = Duration.ofSeconds(2);
  private static final Duration CLOSE = Duration.ofSeconds(15);

  private final NMClient nm;
  private final YarnJob job;
  private final HostPort master;
  private final ByteBuffer containerTokens;
  private final Optional<String> executorArchive;
  private final Map<String, String> environment;
  private final Set<String> stopping = ConcurrentHashMap.newKeySet();
  private final ExecutorService nodeCalls = Executors.newCachedThreadPool(r -> {
    Thread t = new Thread(r, "muster-node-call");
    t.setDaemon(true);
    return t;
  });

  /**
   * @param environment what every executor gets besides the job: the client's log levels, its TLS material's names
   */
  ContainerLauncher(NMClient nm, YarnJob job, HostPort master, ByteBuffer containerTokens,
      Optional<String> executorArchive, Map<String, String> environment) {
    this.nm = nm;
    this.job = job;
    this.master = master;
    this.containerTokens = containerTokens;
    this.executorArchive = executorArchive;
    this.environment = Map.copyOf(environment);
  }

  /** Starts {@code task}'s executor in {@code container} for attempt {@code attempt}; {@code failed} hears why not. */
  void start(Container container, TaskId task, int attempt, Consumer<String> failed) {
    String command = javaCommand(ExecutorArchive.JVM_FLAGS, executorArchive, job, TaskExecutor.class,
        master + " " + task.job() + " " + task.index() + " " + attempt);
    Map<String, String> env = new HashMap<>(environment);
    env.put(Handoff.JOB_ENV, job.toEnvironmentValue());
    ContainerLaunchContext context = ContainerLaunchContext.newInstance(localResources(job), env, List.of(command),
        null, containerTokens.duplicate(), null);
    nodeCalls.execute(() -> {
      try {
        nm.startContainer(container, context);
      } catch (YarnException | IOException | RuntimeException e) {
        failed.accept(task + "'s container " + container.getId() + " could not be started on "
            + container.getNodeId() + ": " + e.getMessage());
      }
    });
  }

  /** Asks the container's NodeManager to stop it, once. */
  void stop(Container container) {
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

  /** Whether the master asked for the container to be stopped. */
  boolean stopping(String containerId) {
    return stopping.contains(containerId);
  }

  /** What a container's NodeManager answered a connection attempt. */
  record NodeAnswer(HostPort node, Reachability.Answer answer) {
    boolean answers() {
      return answer instanceof Reachability.Listening;
    }

    @Override
    public String toString() {
      return "its NodeManager at " + node + ": " + (answers() ? "answers"
          : answer + (answer.silent() ? " (the node is down or cut off)" : ""));
    }
  }

  /** What each container's NodeManager answers a connection attempt, by container id; all at once. */
  Map<String, NodeAnswer> probe(Collection<Container> containers) {
    Map<String, CompletableFuture<NodeAnswer>> probes = new HashMap<>();
    for (Container c : containers) { // each on its own thread: a silent node takes the whole probe timeout
      HostPort node = new HostPort(c.getNodeId().getHost(), c.getNodeId().getPort());
      probes.put(c.getId().toString(), CompletableFuture.supplyAsync(() ->
          new NodeAnswer(node, Reachability.probe(node, NODE_PROBE)), nodeCalls));
    }
    Map<String, NodeAnswer> answers = new HashMap<>();
    probes.forEach((id, probe) -> answers.put(id, probe.join()));
    return answers;
  }

  /** Lets the calls in flight end, {@link #CLOSE} at most. */
  @Override
  public void close() throws InterruptedException {
    nodeCalls.shutdown();
    nodeCalls.awaitTermination(CLOSE.toMillis(), TimeUnit.MILLISECONDS);
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
  static ByteBuffer containerTokens(Credentials credentials) throws IOException {
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

  static Resource resource(YarnJob.Resources resources) {
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
