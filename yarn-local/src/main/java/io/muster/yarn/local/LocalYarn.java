package io.muster.yarn.local;

import java.io.IOException;
import java.io.OutputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.Set;
import java.util.stream.Stream;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.hdfs.MiniDFSCluster;
import org.apache.hadoop.yarn.conf.YarnConfiguration;
import org.apache.hadoop.yarn.server.MiniYARNCluster;
import org.apache.hadoop.yarn.server.resourcemanager.scheduler.fifo.FifoScheduler;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * A YARN cluster and an HDFS in this JVM, on this machine's loopback address: a ResourceManager,
 * two NodeManagers, a namenode and a datanode, with their files under one directory. It is what
 * {@code muster submit --local} runs a job on and what {@code muster yarn-local} keeps running; its
 * configuration directory ({@link #confDir()}) is what {@code HADOOP_CONF_DIR} points at.
 */
public final class LocalYarn implements AutoCloseable {

  private static final Logger log = LoggerFactory.getLogger(LocalYarn.class);
  /** The default resource that names {@link JavaPermissionsLocalFs} as the local FileContext's file system. */
  private static final String FILE_SYSTEM_RESOURCE = "muster-local-yarn-filesystem.xml";
  /** Each NodeManager's memory; the cluster has two. */
  public static final int NODE_MEMORY_MB = 4096;

  /**
   * The reaper's script: it waits for a line on its stdin, which this JVM holds open. "done" (a
   * cluster stopped by {@link #close}) ends it; the end of its input (this JVM ended without
   * stopping the cluster: SIGKILL, a halt) makes it end every process running in the cluster's
   * directory (the containers the NodeManagers started: the master, the executors and their
   * commands' guards), with SIGTERM, then SIGKILL after 3 s, and delete a temporary directory.
   */
  private static final String REAPER = String.join("\n",
      "dir=$1; temporary=$2",
      "IFS= read -r line; [ \"$line\" = done ] && exit 0",
      "inside() { for p in /proc/[0-9]*; do c=$(readlink \"$p/cwd\" 2>/dev/null) || continue;",
      "  case $c in \"$dir\"|\"$dir\"/*) echo \"${p#/proc/}\";; esac; done; }",
      "for signal in TERM TERM TERM KILL; do",
      "  pids=$(inside); [ -z \"$pids\" ] && break",
      "  kill -s $signal $pids 2>/dev/null; sleep 1",
      "done",
      "[ \"$temporary\" = true ] && rm -rf \"$dir\"",
      "exit 0");

  private final MiniDFSCluster hdfs;
  private final MiniYARNCluster yarn;
  private final Path dir;
  private final boolean temporary;
  private final Process reaper;

  private LocalYarn(MiniDFSCluster hdfs, MiniYARNCluster yarn, Path dir, boolean temporary, Process reaper) {
    this.hdfs = hdfs;
    this.yarn = yarn;
    this.dir = dir;
    this.temporary = temporary;
    this.reaper = reaper;
  }

  /** A cluster in a new temporary directory, deleted with everything in it when the cluster stops. */
  public static LocalYarn startTemporary() throws IOException {
    return start(Files.createTempDirectory("muster-local-yarn-"), true);
  }

  /**
   * Starts the cluster with its files under {@code dir}; returns once every node is up. Sets the
   * system property {@code test.build.data} (where Hadoop's mini clusters keep their files) to
   * {@code dir}. Container logs stay until the cluster stops ({@link #containerLogs}).
   */
  public static LocalYarn start(Path dir) throws IOException {
    return start(dir, false);
  }

  private static LocalYarn start(Path dir, boolean temporary) throws IOException {
    return start(dir, temporary, new Configuration(false));
  }

  /**
   * Starts the cluster with {@code settings} (Kerberos principals and keytabs, for one) applied to
   * its namenode, datanode, ResourceManager and NodeManagers; its scheduler is FIFO unless they name
   * another (the capacity scheduler with its queues, for preemption).
   */
  public static LocalYarn start(Path dir, boolean temporary, Configuration settings) throws IOException {
    Files.createDirectories(dir);
    Process reaper = startReaper(dir.toRealPath(), temporary);
    System.setProperty("test.build.data", dir.resolve("yarn").toAbsolutePath().toString());
    // The NodeManagers' local FileContexts set permissions in Java, not by a chmod process each
    // (JavaPermissionsLocalFs): they read only the default resources, so this JVM's every
    // configuration gets it. 4 containers started 0.3-0.5 s sooner, 8 0.3-0.4 s (bench yarn, A/B).
    Configuration.addDefaultResource(FILE_SYSTEM_RESOURCE);
    Configuration dfsConf = new Configuration();
    settings.forEach(setting -> dfsConf.set(setting.getKey(), setting.getValue()));
    dfsConf.set(MiniDFSCluster.HDFS_MINIDFS_BASEDIR, dir.resolve("hdfs").toAbsolutePath().toString());
    // the web servers' scratch files with the cluster's, not in the system's temporary directory
    dfsConf.set("hadoop.http.temp.dir", dir.resolve("http").toAbsolutePath().toString());
    dfsConf.set("dfs.namenode.http-address", "127.0.0.1:0");
    dfsConf.set("dfs.datanode.address", "127.0.0.1:0");
    dfsConf.set("dfs.datanode.http.address", "127.0.0.1:0");
    dfsConf.set("dfs.datanode.ipc.address", "127.0.0.1:0");
    MiniDFSCluster hdfs = new MiniDFSCluster.Builder(dfsConf).numDataNodes(1).build();
    hdfs.waitActive();
    YarnConfiguration conf = new YarnConfiguration(hdfs.getConfiguration(0));
    conf.set("fs.defaultFS", hdfs.getFileSystem().getUri().toString());
    if (settings.get(YarnConfiguration.RM_SCHEDULER) == null) {
      conf.setClass(YarnConfiguration.RM_SCHEDULER, FifoScheduler.class, Object.class);
    }
    conf.setInt(YarnConfiguration.RM_SCHEDULER_MINIMUM_ALLOCATION_MB, 128);
    conf.setInt(YarnConfiguration.NM_PMEM_MB, NODE_MEMORY_MB);
    conf.setInt(YarnConfiguration.YARN_MINICLUSTER_NM_PMEM_MB, NODE_MEMORY_MB);
    conf.setBoolean(YarnConfiguration.NM_VMEM_CHECK_ENABLED, false);
    conf.setBoolean(YarnConfiguration.NM_PMEM_CHECK_ENABLED, false);
    conf.set(YarnConfiguration.NM_DISK_HEALTH_CHECK_ENABLE, "false");
    conf.setFloat(YarnConfiguration.NM_MAX_PER_DISK_UTILIZATION_PERCENTAGE, 99.9f);
    conf.set("yarn.nodemanager.webapp.address", "127.0.0.1:0");
    conf.set("yarn.resourcemanager.webapp.address", "127.0.0.1:0");
    conf.set("yarn.timeline-service.enabled", "false");
    // its clients and masters give up on a ResourceManager that is gone within seconds, not minutes
    conf.setLong(YarnConfiguration.RESOURCEMANAGER_CONNECT_MAX_WAIT_MS, 10_000);
    conf.setLong(YarnConfiguration.RESOURCEMANAGER_CONNECT_RETRY_INTERVAL_MS, 1_000);
    // while its NodeManagers wait for a lost ResourceManager as long as a real cluster's do
    conf.setLong(YarnConfiguration.NM_RESOURCEMANAGER_CONNECT_MAX_WAIT_MS,
        YarnConfiguration.DEFAULT_RESOURCEMANAGER_CONNECT_MAX_WAIT_MS);
    // The scheduler reports its configured maximum allocation for this long after it starts, then the
    // smaller of that and its largest node's: the figures a refused request is given stay the same.
    conf.setLong(YarnConfiguration.RM_WORK_PRESERVING_RECOVERY_SCHEDULING_WAIT_MS, Duration.ofDays(365).toMillis());
    // The scheduler places containers when a NodeManager heartbeats, once a second by default: a
    // cluster of many nodes hears from one every few milliseconds, while these two kept each start
    // waiting up to half a second twice (the master's container, then the gang's), and each ended
    // container as long. A quarter second, as the emulated hosts' cluster has it, costs an idle
    // cluster under a percent of a core.
    conf.setLong(YarnConfiguration.RM_NM_HEARTBEAT_INTERVAL_MS, 250);
    // stopping takes about a second instead of 17
    conf.setLong("yarn.nodemanager.sleep-delay-before-sigkill.ms", 100);
    conf.setLong("yarn.nodemanager.process-kill-wait.ms", 100);
    conf.setLong("yarn.nodemanager.log.retain-seconds", 0);
    conf.setLong("yarn.nodemanager.delete.debug-delay-sec", 24 * 3600);
    MiniYARNCluster yarn = new MiniYARNCluster("muster", 2, 1, 1);
    yarn.init(conf);
    yarn.start();
    Path confDir = dir.resolve("conf");
    Files.createDirectories(confDir);
    try (OutputStream out = Files.newOutputStream(confDir.resolve("yarn-site.xml"))) {
      yarn.getConfig().writeXml(out);
    }
    try (OutputStream out = Files.newOutputStream(confDir.resolve("core-site.xml"))) {
      yarn.getConfig().writeXml(out);
    }
    log.info("local YARN ({} at {}) and HDFS ({}) are up; HADOOP_CONF_DIR={}",
        "2 NodeManagers of " + NODE_MEMORY_MB + " MB", yarn.getConfig().get(YarnConfiguration.RM_ADDRESS),
        hdfs.getFileSystem().getUri(), confDir);
    return new LocalYarn(hdfs, yarn, dir, temporary, reaper);
  }

  /** The reaper ({@link #REAPER}), in a session of its own: a Ctrl-C meant for this JVM does not end it too. */
  private static Process startReaper(Path dir, boolean temporary) throws IOException {
    List<String> command = new ArrayList<>();
    if (Files.isExecutable(Path.of("/usr/bin/setsid")) || Files.isExecutable(Path.of("/bin/setsid"))) {
      command.add("setsid");
    }
    command.addAll(List.of("/bin/sh", "-c", REAPER, "muster-local-yarn-reaper", dir.toString(),
        String.valueOf(temporary)));
    return new ProcessBuilder(command).directory(new java.io.File("/"))
        .redirectOutput(ProcessBuilder.Redirect.DISCARD).redirectError(ProcessBuilder.Redirect.DISCARD).start();
  }

  /** The cluster's configuration: its ResourceManager and {@code fs.defaultFS}. */
  public Configuration configuration() {
    return new YarnConfiguration(yarn.getConfig());
  }

  /** Every log file of the application's containers (their {@code stdout} and {@code stderr}), by path. */
  public List<Path> containerLogs(String applicationId) throws IOException {
    try (Stream<Path> files = Files.walk(Path.of(System.getProperty("test.build.data")))) {
      return files.filter(p -> p.getParent() != null && p.getParent().getParent() != null
              && p.getParent().getParent().getFileName().toString().equals(applicationId)
              && Set.of("stdout", "stderr").contains(p.getFileName().toString()))
          .sorted().toList();
    }
  }

  public Path confDir() {
    return dir.resolve("conf");
  }

  /** Where the cluster keeps its files. */
  public Path directory() {
    return dir;
  }

  public MiniYARNCluster yarn() {
    return yarn;
  }

  @Override
  public void close() {
    yarn.stop();
    hdfs.shutdown();
    try (OutputStream toReaper = reaper.getOutputStream()) {
      toReaper.write("done\n".getBytes(java.nio.charset.StandardCharsets.US_ASCII));
    } catch (IOException e) {
      log.debug("the local cluster's reaper has ended already", e);
    }
    if (temporary) {
      try (Stream<Path> paths = Files.walk(dir)) {
        for (Path p : paths.sorted(Comparator.reverseOrder()).toList()) {
          Files.deleteIfExists(p);
        }
      } catch (IOException e) {
        log.warn("cannot delete the local cluster's directory {}: {}", dir, e.toString());
      }
    }
  }

}
