package io.muster.rig;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.regex.Pattern;
import java.util.stream.Stream;

/**
 * Real YARN daemons on emulated hosts: a {@code ResourceManager} (CapacityScheduler, one queue) on
 * one host and a {@code NodeManager} (DefaultContainerExecutor) on each of the others, so containers
 * run as processes on the worker hosts. Their configuration joins HDFS's in the same
 * {@code HADOOP_CONF_DIR}, which a client on a host uses to submit.
 */
public final class Yarn implements AutoCloseable {

  private static final Duration START = Duration.ofMinutes(2);

  private final Host resourceManagerHost;
  private final Path conf;
  private final List<HostProcess> daemons = new ArrayList<>();
  private final Map<String, HostProcess> nodeManagers = new java.util.HashMap<>();

  private Yarn(Host resourceManagerHost, Path conf) {
    this.resourceManagerHost = resourceManagerHost;
    this.conf = conf;
  }

  /** Starts the daemons; {@code hdfs} must be running (its configuration directory is shared). */
  public static Yarn start(EmulatedHosts rig, Hdfs hdfs, Host resourceManager, List<Host> nodeManagers) {
    Path conf = hdfs.conf();
    Daemons.siteXml(conf.resolve("yarn-site.xml"), new TreeMap<>(Map.ofEntries(
        Map.entry("yarn.resourcemanager.hostname", resourceManager.name()),
        // each host's own /tmp
        Map.entry("yarn.nodemanager.local-dirs", "/tmp/yarn/local"),
        Map.entry("yarn.nodemanager.log-dirs", "/tmp/yarn/logs"),
        Map.entry("yarn.nodemanager.resource.memory-mb", "2048"),
        Map.entry("yarn.nodemanager.resource.cpu-vcores", "4"),
        Map.entry("yarn.scheduler.minimum-allocation-mb", "128"),
        Map.entry("yarn.nodemanager.vmem-check-enabled", "false"),
        Map.entry("yarn.nodemanager.pmem-check-enabled", "false"),
        // a shared build machine's disk may be fuller than YARN's 90% default allows
        Map.entry("yarn.nodemanager.disk-health-checker.max-disk-utilization-per-disk-percentage", "99.5"),
        Map.entry("yarn.nodemanager.delete.debug-delay-sec", "0"),
        Map.entry("yarn.resourcemanager.nodemanagers.heartbeat-interval-ms", "250"))));
    Daemons.siteXml(conf.resolve("capacity-scheduler.xml"), new TreeMap<>(Map.of(
        "yarn.scheduler.capacity.root.queues", "default",
        "yarn.scheduler.capacity.root.default.capacity", "100",
        "yarn.scheduler.capacity.maximum-am-resource-percent", "0.5",
        "yarn.scheduler.capacity.node-locality-delay", "0")));
    Path log4j = Daemons.log4j(rig.dir());
    List<Path> classpath = new ArrayList<>(List.of(conf));
    classpath.addAll(Installed.hadoop());
    // as Hadoop's scripts start YARN on Java 17: its web apps' Guice defines classes reflectively
    List<String> flags = List.of("--add-opens=java.base/java.lang=ALL-UNNAMED");
    Yarn yarn = new Yarn(resourceManager, conf);
    try {
      HostProcess rm = resourceManager.start("resourcemanager", Daemons.java(log4j, classpath, flags,
          "org.apache.hadoop.yarn.server.resourcemanager.ResourceManager", List.of()), Map.of());
      yarn.daemons.add(rm);
      rm.awaitLine(Pattern.compile("Transitioned to active state"), START, "the ResourceManager becoming active");
      for (Host host : nodeManagers) {
        HostProcess nm = host.start("nodemanager", Daemons.java(log4j, classpath, flags,
            "org.apache.hadoop.yarn.server.nodemanager.NodeManager", List.of()), Map.of());
        yarn.daemons.add(nm);
        yarn.nodeManagers.put(host.name(), nm);
      }
      for (HostProcess nm : yarn.daemons.subList(1, yarn.daemons.size())) {
        nm.awaitLine(Pattern.compile("Registered with ResourceManager"), START, "registration with the ResourceManager");
      }
      return yarn;
    } catch (RuntimeException e) {
      yarn.close();
      throw e;
    }
  }

  /** The NodeManager on {@code host}, whose log tells which containers it was asked to start. */
  public HostProcess nodeManager(Host host) {
    return nodeManagers.get(host.name());
  }

  /** {@code muster ARGS} on {@code host}, as ./muster runs it, with the rig's HADOOP_CONF_DIR. */
  public HostProcess muster(Host host, String name, List<String> args) {
    List<Path> classpath = new ArrayList<>(List.of(conf));
    classpath.addAll(Installed.cli());
    List<String> command = new ArrayList<>(List.of(Installed.java(), "-Xmx512m",
        "--add-opens=java.base/java.lang=ALL-UNNAMED",
        "-Djava.util.logging.manager=org.apache.logging.log4j.jul.LogManager",
        "-cp", Installed.joined(classpath), "io.muster.cli.Muster"));
    command.addAll(args);
    return host.start(name, command, Map.of("HADOOP_CONF_DIR", conf.toString()));
  }

  /** Every container's stdout file the NodeManager on {@code host} kept, of every application. */
  public static List<Path> containerStdouts(Host host) throws IOException {
    Path logs = host.scratch().resolve("tmp/yarn/logs");
    if (!Files.isDirectory(logs)) {
      return List.of();
    }
    try (Stream<Path> files = Files.walk(logs)) {
      return files.filter(p -> p.getFileName().toString().equals("stdout")).toList();
    }
  }

  /** The files a host's NodeManager keeps for the users' jobs ({@code usercache/<user>/filecache}). */
  public static List<Path> userCacheFiles(Host host) throws IOException {
    Path users = host.scratch().resolve("tmp/yarn/local/usercache");
    if (!Files.isDirectory(users)) {
      return List.of();
    }
    try (Stream<Path> files = Files.walk(users)) {
      // not usercache/<user>/appcache/<application>/filecache: an application's own files, deleted with it
      return files.filter(p -> Files.isRegularFile(p) && users.relativize(p).getNameCount() > 2
          && users.relativize(p).getName(1).toString().equals("filecache")).toList();
    }
  }

  /** {@code host1:8032}: where clients submit. */
  public String resourceManager() {
    return resourceManagerHost.name() + ":8032";
  }

  @Override
  public void close() {
    daemons.forEach(HostProcess::close);
  }
}
