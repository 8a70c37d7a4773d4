package io.muster.examples;

import java.util.regex.Pattern;
import org.apache.hadoop.conf.Configuration;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Paths that must be the same on every host. On Spark {@code local[N]} (and {@code local-cluster})
 * every task runs on this machine, so a path on it is fine; with a cluster master the tasks run on
 * other hosts, where a path on this machine either does not exist (the data) or is written on the
 * chief's own host, out of the user's sight (the outputs). There a bare local path is refused and a
 * {@code file:} URI is taken as a directory every host mounts, with a warning.
 */
final class ClusterPaths {
  private static final Logger log = LoggerFactory.getLogger(ClusterPaths.class);
  private static final Pattern ONE_MACHINE = Pattern.compile("local(\\[.*])?|local-cluster\\[.*]");
  private static final Pattern URI = Pattern.compile("[a-zA-Z][a-zA-Z0-9+.-]*:.*");

  private ClusterPaths() {}

  /** The master spark-submit set, or empty under {@code ./muster}, which runs Spark in this JVM. */
  static String master() {
    return System.getProperty("spark.master", "");
  }

  /**
   * Checks option {@code name}'s {@code value} (a path or a Hadoop URI; empty: not given) for the
   * master {@code master}.
   *
   * @throws IllegalArgumentException for a bare local path with a cluster master
   */
  static void check(String name, String value, String master) {
    if (value.isEmpty() || master.isEmpty() || ONE_MACHINE.matcher(master).matches()) {
      return;
    }
    if (!URI.matcher(value).matches()) {
      throw new IllegalArgumentException(name + " " + value + " is a path on this machine, but the tasks run on the "
          + "hosts of " + master + ", which do not see it; give a URI every host reaches, " + example(value)
          + ", or file://" + java.nio.file.Path.of(value).toAbsolutePath().normalize()
          + " if every host mounts that directory");
    }
    if (value.startsWith("file:")) {
      log.warn("{} {} is on each host's own file system: with master {} every host must mount it at that path",
          name, value, master);
    }
  }

  /** An example URI on the cluster's default file system, when one is configured. */
  private static String example(String value) {
    String defaultFs = System.getProperty("spark.hadoop.fs.defaultFS", new Configuration().get("fs.defaultFS", ""));
    String name = java.nio.file.Path.of(value).getFileName() == null ? "data" : java.nio.file.Path.of(value)
        .getFileName().toString();
    if (defaultFs.isEmpty() || defaultFs.startsWith("file:")) {
      return "such as hdfs://NAMENODE:8020/jobs/" + name + " (no fs.defaultFS is configured here: is HADOOP_CONF_DIR set?)";
    }
    return "such as " + defaultFs.replaceAll("/+$", "") + "/jobs/" + name + " (fs.defaultFS)";
  }
}
