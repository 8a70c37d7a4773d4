package io.muster.rig;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.URI;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.regex.Pattern;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FileSystem;

/**
 * Real HDFS daemons on emulated hosts: a freshly formatted NameNode on one host, a DataNode on each
 * of the others (replication 2), each its own JVM with the configuration files written here
 * ({@code hadoop-conf/}; a client on a host puts that directory on its class path, as
 * {@code HADOOP_CONF_DIR}).
 */
public final class Hdfs implements AutoCloseable {

  static final int PORT = 8020;
  private static final Duration START = Duration.ofMinutes(2);

  private final Host nameNodeHost;
  private final Path conf;
  private final Path log4j;
  private final List<Path> classpath;
  private final List<HostProcess> daemons = new ArrayList<>();
  private final Map<Host, HostProcess> dataNodes = new java.util.HashMap<>();
  private FileSystem client;

  private Hdfs(Host nameNodeHost, Path conf, Path log4j, List<Path> classpath) {
    this.nameNodeHost = nameNodeHost;
    this.conf = conf;
    this.log4j = log4j;
    this.classpath = classpath;
  }

  public static Hdfs start(EmulatedHosts rig, Host nameNode, List<Host> dataNodes) {
    Path conf = rig.dir().resolve("hadoop-conf");
    Map<String, String> core = new TreeMap<>(Map.of("fs.defaultFS", "hdfs://" + nameNode.name() + ":" + PORT,
        "hadoop.tmp.dir", "/tmp/hadoop"));
    Daemons.siteXml(conf.resolve("core-site.xml"), core);
    Daemons.siteXml(conf.resolve("hdfs-site.xml"), new TreeMap<>(Map.of(
        "dfs.replication", "2",
        "dfs.permissions.enabled", "false",
        // each host's own /tmp: the name and data directories are not shared between hosts
        "dfs.namenode.name.dir", "/tmp/hadoop/name",
        "dfs.datanode.data.dir", "/tmp/hadoop/data",
        "dfs.namenode.safemode.extension", "0",
        "dfs.heartbeat.interval", "1",
        // as HBase advises where hosts can go silent: a DataNode unheard for 10 heartbeats (the
        // default's ratio) is read from last and written to never, long before it is declared dead
        "dfs.namenode.stale.datanode.interval", "10000",
        "dfs.namenode.avoid.read.stale.datanode", "true",
        "dfs.namenode.avoid.write.stale.datanode", "true",
        // the DataNodes' own timeout on the next DataNode of a write pipeline (60 s by default): below
        // the writer's, so a DataNode names a silent one downstream before the writer gives up on
        // the first DataNode itself, excluding a healthy node (and then falling back to the stale one)
        "dfs.client.socket-timeout", "5000")));
    Path log4j = Daemons.log4j(rig.dir());
    List<Path> classpath = new ArrayList<>(List.of(conf));
    classpath.addAll(Installed.hadoop());
    Hdfs hdfs = new Hdfs(nameNode, conf, log4j, classpath);
    try {
      String nn = "org.apache.hadoop.hdfs.server.namenode.NameNode";
      try (HostProcess format = nameNode.start("namenode-format",
          Daemons.java(log4j, classpath, List.of(), nn, List.of("-format", "-nonInteractive")), Map.of())) {
        int code = format.waitFor(START);
        if (code != 0) {
          throw new IllegalStateException("formatting the NameNode on " + nameNode + " exited with " + code + "\n"
              + format.tail());
        }
      }
      HostProcess nameNodeProcess = nameNode.start("namenode", Daemons.java(log4j, classpath, List.of(), nn, List.of()),
          Map.of());
      hdfs.daemons.add(nameNodeProcess);
      dataNodes.forEach(hdfs::startDataNode);
      hdfs.dataNodes.values().forEach(Hdfs::awaitRegistered);
      nameNodeProcess.awaitLine(Pattern.compile("(?i)safe mode is OFF|leaving safe mode"), START,
          "the NameNode leaving safe mode");
      return hdfs;
    } catch (RuntimeException e) {
      hdfs.close();
      throw e;
    }
  }

  private HostProcess startDataNode(Host host) {
    HostProcess dataNode = host.start("datanode", Daemons.java(log4j, classpath, List.of(),
        "org.apache.hadoop.hdfs.server.datanode.DataNode", List.of()), Map.of());
    daemons.add(dataNode);
    dataNodes.put(host, dataNode);
    return dataNode;
  }

  private static void awaitRegistered(HostProcess dataNode) {
    dataNode.awaitLine(Pattern.compile("successfully registered with NN"), START, "registration with the NameNode");
  }

  /** Kills {@code host}'s DataNode (SIGKILL), as a crash would end it. */
  public void killDataNode(Host host) {
    dataNodes.get(host).close();
  }

  /** Starts {@code host}'s DataNode again (on its old data directory) and waits for its registration. */
  public void restartDataNode(Host host) {
    awaitRegistered(startDataNode(host));
  }

  /** {@code hdfs://host1:8020}: the file system's URI on the hosts. */
  public String uri() {
    return "hdfs://" + nameNodeHost.name() + ":" + PORT;
  }

  /** The Hadoop configuration directory the hosts' clients use ({@code HADOOP_CONF_DIR}). */
  public Path conf() {
    return conf;
  }

  /**
   * A client in the test's own namespace, which has no /etc/hosts entries for the hosts: it reaches
   * the NameNode by its address, and the DataNodes by the addresses the NameNode gives.
   */
  public synchronized FileSystem client() {
    if (client == null) {
      try {
        client = FileSystem.newInstance(URI.create("hdfs://" + nameNodeHost.address() + ":" + PORT),
            new Configuration());
      } catch (IOException e) {
        throw new UncheckedIOException("cannot reach the NameNode on " + nameNodeHost + ": " + e.getMessage(), e);
      }
    }
    return client;
  }

  /** {@code hdfs://host1:8020/jobs/x} as the test's own client names it. */
  public org.apache.hadoop.fs.Path path(String absolute) {
    return new org.apache.hadoop.fs.Path("hdfs://" + nameNodeHost.address() + ":" + PORT + absolute);
  }

  @Override
  public void close() {
    if (client != null) {
      try {
        client.close();
      } catch (IOException ignored) {
        // the daemons go next
      }
    }
    daemons.forEach(HostProcess::close);
  }
}
