package io.muster.rig;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.regex.Pattern;

/**
 * A real Spark standalone cluster on emulated hosts: a {@code Master} on one host, a {@code Worker}
 * on each of the others, each its own JVM; the Workers start their executors as real JVMs from a
 * Spark home laid out as a distribution's ({@code RELEASE}, {@code jars/} of Spark and its Hadoop
 * client, no {@code conf/log4j2.properties}: Spark's own default logging), and keep them under their
 * host's {@code work/} directory. Jobs are submitted with Spark's own {@code SparkSubmit}.
 */
public final class SparkStandalone implements AutoCloseable {
  /** The Master's web UI, asked often while a test waits for a Worker: one client, not one a call. */
  private final java.net.http.HttpClient http = java.net.http.HttpClient.newHttpClient();

  static final int PORT = 7077;
  private static final Duration START = Duration.ofMinutes(2);

  private final Host masterHost;
  private final Path home;
  private final Path log4j;
  private final List<HostProcess> daemons = new ArrayList<>();

  private SparkStandalone(Host masterHost, Path home, Path log4j) {
    this.masterHost = masterHost;
    this.home = home;
    this.log4j = log4j;
  }

  /** Starts the Master on {@code master} and a Worker with {@code cores} cores on each of {@code workers}. */
  public static SparkStandalone start(EmulatedHosts rig, Host master, List<Host> workers, int cores) {
    SparkStandalone spark = new SparkStandalone(master, layOutHome(rig.dir().resolve("spark-home")),
        Daemons.log4j(rig.dir()));
    try {
      HostProcess masterProcess = master.start("spark-master", Daemons.java(spark.log4j, spark.classpath(),
          Installed.sparkJvmFlags(), "org.apache.spark.deploy.master.Master", List.of("--host", master.name(), "--port",
              String.valueOf(PORT), "--webui-port", "8080")), spark.env());
      spark.daemons.add(masterProcess);
      masterProcess.awaitLine(Pattern.compile("I have been elected leader"), START, "the Master's start");
      List<HostProcess> started = workers.stream().map(host -> spark.launchWorker(host, cores)).toList();
      started.forEach(SparkStandalone::awaitRegistered);
      return spark;
    } catch (RuntimeException e) {
      spark.close();
      throw e;
    }
  }

  /**
   * Starts a Worker with {@code cores} cores on {@code host} and waits until the Master has it; the
   * Worker and its executors end with {@link Host#killAll}.
   */
  public void startWorker(Host host, int cores) {
    awaitRegistered(launchWorker(host, cores));
  }

  private HostProcess launchWorker(Host host, int cores) {
    HostProcess worker = host.start("spark-worker", Daemons.java(log4j, classpath(), Installed.sparkJvmFlags(),
        "org.apache.spark.deploy.worker.Worker", List.of("--host", host.name(), "--cores", String.valueOf(cores),
            "--memory", "1g", "--work-dir", host.scratch().resolve("work").toString(), masterUrl())), env());
    daemons.add(worker);
    return worker;
  }

  private static void awaitRegistered(HostProcess worker) {
    worker.awaitLine(Pattern.compile("Successfully registered with master"), START, "registration with the Master");
  }

  private List<Path> classpath() {
    return List.of(home.resolve("jars").resolve("*"));
  }

  private static Path layOutHome(Path home) {
    try {
      Files.createDirectories(home.resolve("jars"));
      Files.writeString(home.resolve("RELEASE"), "Spark laid out by Muster's cluster tests\n");
      for (Path jar : Installed.spark()) {
        Path link = home.resolve("jars").resolve(jar.getFileName());
        if (!Files.exists(link, java.nio.file.LinkOption.NOFOLLOW_LINKS)) {
          Files.createSymbolicLink(link, jar);
        }
      }
      return home;
    } catch (IOException e) {
      throw new UncheckedIOException("cannot lay out a Spark home in " + home + ": " + e.getMessage(), e);
    }
  }

  /** What a Spark distribution's scripts would set. */
  private Map<String, String> env() {
    // The launcher library looks for launcher/target/scala-* unless told the Scala version.
    return Map.of("SPARK_HOME", home.toString(), "SPARK_SCALA_VERSION", "2.13");
  }

  /** {@code spark://host1:7077}. */
  public String masterUrl() {
    return "spark://" + masterHost.name() + ":" + PORT;
  }

  /**
   * Runs {@code spark-submit ARGS} on {@code client} (its JVM as Spark's launcher makes it, with
   * the Spark home's jars), with {@code hadoopConf} as {@code HADOOP_CONF_DIR} when not null.
   */
  public HostProcess submit(Host client, String name, Path hadoopConf, List<String> args) {
    List<Path> classpath = new ArrayList<>();
    if (hadoopConf != null) {
      classpath.add(hadoopConf);
    }
    classpath.add(home.resolve("jars").resolve("*"));
    List<String> command = new ArrayList<>(List.of(Installed.java(), "-Xmx512m"));
    command.addAll(Installed.sparkJvmFlags());
    command.addAll(List.of("-cp", Installed.joined(classpath), "org.apache.spark.deploy.SparkSubmit"));
    command.addAll(args);
    Map<String, String> env = new java.util.HashMap<>(env());
    if (hadoopConf != null) {
      env.put("HADOOP_CONF_DIR", hadoopConf.toString());
    }
    return client.start(name, command, env);
  }

  /**
   * When the Master last heard from the Worker on {@code worker} (epoch ms, from its web UI's
   * JSON), or -1 when it does not list that Worker as alive. A link cut and healed leaves the
   * Worker's heartbeats in TCP's retransmission backoff for a while: the Master drops a Worker it
   * has not heard from for {@code spark.worker.timeout} (60 s) since before the cut.
   */
  public long lastHeartbeat(Host worker) {
    try {
      String json = http.send(java.net.http.HttpRequest.newBuilder(
          java.net.URI.create("http://" + masterHost.address() + ":8080/json/")).timeout(java.time.Duration.ofSeconds(5))
          .build(), java.net.http.HttpResponse.BodyHandlers.ofString()).body();
      for (String entry : json.split("\"id\"")) {
        java.util.regex.Matcher host = Pattern.compile("\"host\"\\s*:\\s*\"" + worker.name() + "\"").matcher(entry);
        java.util.regex.Matcher beat = Pattern.compile("\"lastheartbeat\"\\s*:\\s*(\\d+)").matcher(entry);
        if (host.find() && entry.matches("(?s).*\"state\"\\s*:\\s*\"ALIVE\".*") && beat.find()) {
          return Long.parseLong(beat.group(1));
        }
      }
      return -1;
    } catch (IOException e) {
      return -1;
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      return -1;
    }
  }

  @Override
  public void close() {
    daemons.forEach(HostProcess::close);
  }
}
