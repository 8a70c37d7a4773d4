package io.muster.rig;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.muster.testing.PythonTensorFlow;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.MethodOrderer;
import org.junit.jupiter.api.Order;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestMethodOrder;

/**
 * {@code muster submit} to a real YARN cluster of emulated hosts: the ResourceManager and the
 * NameNode on host1, a NodeManager and a DataNode on each of host2..host5, the client on host1 with
 * {@code HADOOP_CONF_DIR} pointing at the rig's configuration, Muster's runtime staged on HDFS.
 */
@TestMethodOrder(MethodOrderer.OrderAnnotation.class)
class YarnTest {

  private static final Duration JOB = Duration.ofMinutes(5);
  /** More than half a NodeManager's 2 GiB: YARN places one worker per host (the master's 512 MiB fits beside one). */
  private static final String ONE_PER_HOST = "1536m";
  private static EmulatedHosts rig;
  private static Hdfs hdfs;
  private static Yarn yarn;

  @BeforeAll
  static void startCluster() {
    assumeTrue(EmulatedHosts.unavailable().isEmpty(), () -> "skipped: " + EmulatedHosts.unavailable().orElseThrow());
    rig = EmulatedHosts.create(Path.of(System.getProperty("java.io.tmpdir"), "rig-yarn"), 5);
    List<Host> workers = rig.hosts().subList(1, 5);
    hdfs = Hdfs.start(rig, rig.host(1), workers);
    yarn = Yarn.start(rig, hdfs, rig.host(1), workers);
  }

  @AfterAll
  static void stopCluster() {
    if (yarn != null) {
      yarn.close();
    }
    if (hdfs != null) {
      hdfs.close();
    }
    if (rig != null) {
      rig.close();
    }
  }

  @Test
  void aGangOfThreeRunsOnThreeHostsWithTfConfigsNamingThemAndItsStatusPageBehindTheTrackingUrl() throws Exception {
    String page;
    HostProcess run;
    // the commands run until the test has read the status page (a file every host sees), 60 s at most
    Path read = rig.dir().resolve("tf-config-page-read");
    try (HostProcess submit = yarn.muster(rig.host(1), "submit-tf-config", List.of("submit", "--worker-instances", "3",
        "--worker-memory", ONE_PER_HOST, "--command", "echo \"$(hostname) $TF_CONFIG\"; " + waitFor(read)))) {
      run = submit;
      // the master's status page, through the ResourceManager's proxy, while the gang runs
      submit.awaitLine(Pattern.compile("attempt 1: 3 workers running"), JOB, "every worker running");
      Matcher url = Pattern.compile("RUNNING \\((http://host1:8088/proxy/\\S+/)\\)").matcher(String.join("\n",
          submit.stdout()));
      assertTrue(url.find(), submit.tail());
      HttpResponse<String> status = HttpClient.newHttpClient().send(HttpRequest.newBuilder(URI.create(url.group(1)
          .replace("host1", rig.host(1).address()) + "status.json")).timeout(Duration.ofSeconds(30)).build(),
          HttpResponse.BodyHandlers.ofString());
      assertEquals(200, status.statusCode(), status.body());
      page = status.body();
      Files.createFile(read);
      assertEquals(0, submit.waitFor(JOB), submit.tail());
    }
    assertTrue(last(run.stdout()).endsWith("SUCCEEDED: succeeded on attempt 1 of 1"), run.tail());
    assertTrue(page.contains("\"worker\""), page);

    // Each command wrote its line into its container's log on the host it ran on.
    Map<String, String> byHost = new TreeMap<>();
    for (Host host : rig.hosts()) {
      for (Path stdout : Yarn.containerStdouts(host)) {
        // this test's lines; the class's other jobs ran on the same cluster
        Files.readAllLines(stdout).stream().filter(l -> l.matches("host\\d \\{.*")).forEach(l -> byHost.put(host.name(), l));
      }
    }
    assertEquals(3, byHost.size(), "one worker per host: " + byHost);
    for (Map.Entry<String, String> e : byHost.entrySet()) {
      Matcher m = Pattern.compile("(host\\d) \\{\"cluster\": \\{\"worker\": \\[([^]]*)]}, \"task\": \\{\"type\": "
          + "\"worker\", \"index\": (\\d)}}").matcher(e.getValue());
      assertTrue(m.matches(), e.getValue());
      assertEquals(e.getKey(), m.group(1));
      List<String> workers = List.of(m.group(2).replace("\"", "").split(",\\s*"));
      assertTrue(workers.stream().allMatch(a -> a.matches("host[2-5]:\\d+")), "host names, no loopback: " + workers);
      assertEquals(e.getKey(), workers.get(Integer.parseInt(m.group(3))).split(":")[0], "its own entry: " + e);
    }
  }

  @Test
  void realTensorFlowMultiWorkerMirroredStrategyOnThreeHosts() throws Exception {
    Path python = PythonTensorFlow.python();
    // the script SubmitLocalTest runs on an in-process YARN
    Path script = Installed.root().resolve("cli/src/test/resources/mwms_train.py");
    // TensorFlow for Python reaches hdfs:// only through tensorflow-io, which these machines cannot
    // install: the output directory is a path on each host, and the chief's checkpoint is read on its host.
    try (HostProcess submit = yarn.muster(rig.host(1), "submit-mwms", List.of("submit", "--name", "mwms",
        "--worker-instances", "3", "--worker-memory", ONE_PER_HOST, "--gang-timeout", "5m", "--files", script.toString(),
        "--output-dir", "/tmp/mwms-out", "--command", python + " mwms_train.py"))) {
      assertEquals(0, submit.waitFor(JOB), submit.tail());
      assertTrue(last(submit.stdout()).endsWith("SUCCEEDED: succeeded on attempt 1 of 1"), submit.tail());
      assertEquals(List.of("muster submit: --output-dir /tmp/mwms-out is a path on each container's own host: the "
          + "chief's outputs stay on the chief's host; give a URI of the cluster's file system (hdfs://...) to have "
          + "them in one place"), submit.stderr());
    }
    List<String> digests = new ArrayList<>();
    List<String> ranOn = new ArrayList<>();
    for (Host host : rig.hosts()) {
      for (Path stdout : Yarn.containerStdouts(host)) {
        for (String line : Files.readAllLines(stdout)) {
          if (line.startsWith("weights-sha256 ")) {
            digests.add(line.split(" ")[1]);
            ranOn.add(host.name());
          }
        }
      }
    }
    assertEquals(3, ranOn.stream().distinct().count(), "one worker per host: " + ranOn);
    assertEquals(1, digests.stream().distinct().count(), "identical weights on every host: " + digests);
    List<String> withCheckpoint = rig.hosts().stream()
        .filter(h -> Files.exists(h.scratch().resolve("tmp/mwms-out/checkpoint"))).map(Host::name).toList();
    assertEquals(1, withCheckpoint.size(), "the chief's checkpoint, on the chief's host alone: " + withCheckpoint);
    for (Host host : rig.hosts()) {
      Path out = host.scratch().resolve("tmp/mwms-out");
      if (Files.isDirectory(out)) {
        try (Stream<Path> files = Files.list(out)) {
          assertTrue(files.noneMatch(p -> p.getFileName().toString().startsWith("workertemp")), host + ": " + out);
        }
      }
    }
  }

  @Test
  void realTensorFlowParameterServerStrategyWithEveryTaskOnItsOwnHost() throws Exception {
    Path python = PythonTensorFlow.python();
    // the script SparkRunTest runs on Spark: the chief adds 1 to a variable on the ps 50 times through the workers
    Path script = Installed.root().resolve("examples/src/test/resources/ps_strategy.py");
    List<String> args = new ArrayList<>(List.of("submit", "--name", "ps", "--chief-instances", "1",
        "--worker-instances", "2", "--ps-instances", "1", "--gang-timeout", "5m", "--files", script.toString(),
        "--command", python + " ps_strategy.py"));
    for (String type : List.of("chief", "worker", "ps")) {
      args.addAll(List.of("--" + type + "-memory", ONE_PER_HOST));
    }
    try (HostProcess submit = yarn.muster(rig.host(1), "submit-ps", args)) {
      assertEquals(0, submit.waitFor(JOB), submit.tail());
      assertTrue(last(submit.stdout()).endsWith("SUCCEEDED: succeeded on attempt 1 of 1"), submit.tail());
    }
    Map<String, String> started = new TreeMap<>(); // "chief 0" -> host
    String total = null;
    for (Host host : rig.hosts()) {
      for (Path stdout : Yarn.containerStdouts(host)) {
        for (String line : Files.readAllLines(stdout)) {
          Matcher m = Pattern.compile("started (chief|worker|ps) (\\d) pid \\d+").matcher(line);
          if (m.matches()) {
            started.put(m.group(1) + " " + m.group(2), host.name());
          } else if (line.startsWith("total=")) {
            total = line;
          }
        }
      }
    }
    assertEquals(List.of("chief 0", "ps 0", "worker 0", "worker 1"), List.copyOf(started.keySet()), started.toString());
    assertEquals(4, started.values().stream().distinct().count(), "every task on its own host: " + started);
    assertEquals("total=50", total);
  }

  /**
   * Muster's staged runtime is localized into each host's cache of the user's files, once, and every
   * later job's containers there start from that copy instead of fetching the jars from HDFS again
   * (a job's own files stay the job's and go with it).
   */
  @Test
  @Order(Integer.MAX_VALUE - 2)
  void theStagedRuntimeIsLocalizedOncePerHostAndKeptForLaterJobs() throws Exception {
    for (int job = 1; job <= 2; job++) {
      try (HostProcess submit = yarn.muster(rig.host(1), "submit-runtime-" + job, List.of("submit",
          "--worker-instances", "3", "--worker-memory", ONE_PER_HOST, "--command", "true"))) {
        assertEquals(0, submit.waitFor(JOB), submit.tail());
      }
    }
    // Two jobs of three workers (one per host) on four NodeManagers: at least two hosts ran both.
    int holding = 0;
    for (Host host : rig.hosts()) {
      Map<String, Integer> copies = new TreeMap<>();
      for (Path jar : Yarn.userCacheFiles(host)) {
        copies.merge(jar.getFileName().toString(), 1, Integer::sum);
      }
      assertTrue(copies.values().stream().allMatch(n -> n == 1), host.name() + " localized a jar twice: " + copies);
      if (copies.keySet().stream().anyMatch(name -> name.matches("[0-9a-f]{16}-muster-yarn-am-.*\\.jar"))) {
        holding++;
      }
    }
    assertTrue(holding >= 3, "the runtime in the user cache of " + holding + " hosts; each job ran on three");
  }

  /**
   * A worker host's link cut while the gang runs: nothing is reset, the NodeManager is silent, and
   * YARN would declare it lost only after 10 minutes. The master times the silent executor out
   * itself, leaves the node out, and runs the gang again on the other hosts without counting the
   * attempt. Before the test that runs last, which cuts a host too; the link is healed here.
   */
  @Test
  @Order(Integer.MAX_VALUE - 1)
  void aNodeCutWhileTheGangRunsEndsTheAttemptAndTheRetryRunsUncountedOnTheOtherHosts() throws Exception {
    Host cut;
    String app;
    HostProcess run;
    java.time.LocalTime cutAt;
    String page;
    String html;
    Duration rerun;
    // the first attempt's commands run until the cut; the second's until the status page has been read
    Path read = rig.dir().resolve("cut-while-running-page-read");
    try (HostProcess submit = yarn.muster(rig.host(1), "submit-cut-while-running", List.of("submit",
        "--worker-instances", "3", "--worker-memory", ONE_PER_HOST, "--max-attempts", "1", "--command",
        "if [ \"$MUSTER_ATTEMPT\" = 0 ]; then echo $$ > /tmp/cut-while-running.pid; sleep 300; fi; " + waitFor(read)
            + "; echo \"ran on $(hostname)\""))) {
      run = submit;
      app = applicationId(submit);
      cut = workerHost(app, submit);
      submit.awaitLine(Pattern.compile("attempt 1: 3 workers running"), JOB, "every worker running");
      // "running" is the executors' registration; the commands start once the gang has formed, a moment later
      Path pidFile = cut.scratch().resolve("tmp/cut-while-running.pid");
      io.muster.testing.Eventually.within(Duration.ofSeconds(60), "the command on " + cut.name() + " started",
          () -> pidFile.toFile().length() > 0);
      cutAt = java.time.LocalTime.now();
      cut.cutLink();
      try {
        submit.awaitLine(Pattern.compile("attempt 2: 3 workers running"), JOB, "every worker of attempt 2 running");
        rerun = Duration.between(cutAt, java.time.LocalTime.now());
        Matcher url = Pattern.compile("RUNNING \\((http://host1:8088/proxy/\\S+/)\\)").matcher(String.join("\n",
            submit.stdout()));
        assertTrue(url.find(), submit.tail());
        String base = url.group(1).replace("host1", rig.host(1).address());
        page = HttpClient.newHttpClient().send(HttpRequest.newBuilder(URI.create(base + "status.json"))
            .timeout(Duration.ofSeconds(30)).build(), HttpResponse.BodyHandlers.ofString()).body();
        html = HttpClient.newHttpClient().send(HttpRequest.newBuilder(URI.create(base))
            .timeout(Duration.ofSeconds(30)).build(), HttpResponse.BodyHandlers.ofString()).body();
        Files.createFile(read);
        assertEquals(0, submit.waitFor(JOB), submit.tail());
      } finally {
        cut.healLink();
      }
    }
    String out = String.join("\n", run.stdout());
    assertTrue(out.contains("SUCCEEDED: succeeded on attempt 2 (1 of 1 that count)"), run.tail());
    Matcher failed = Pattern.compile("attempt 1 of 1 failed: worker \\d on " + cut.name() + " \\(container \\S+\\) went "
        + "silent: no word from it for (\\d+) s; its NodeManager at " + cut.name() + ":\\d+: no answer within "
        + "2000 ms \\(the node is down or cut off\\); " + cut.name() + " left out of the job's next attempts \\(a node went "
        + "silent; this attempt does not count\\)").matcher(out);
    assertTrue(failed.find(), run.tail());
    assertTrue(page.contains("\"lost_nodes\": {\"" + cut.name() + "\": \"attempt 1: worker "), page);
    assertTrue(html.contains("<ul id=\"lost-nodes\"><li><b>" + cut.name() + "</b>: attempt 1: worker "), html);
    assertTrue(out.contains("(lost nodes: " + cut.name() + ")"), "the progress line names the lost node: " + run.tail());

    // The master's own account: when it ended the attempt, against the cut.
    String ended = null;
    for (Host host : rig.hosts()) {
      Path amLog = host.scratch().resolve("tmp/yarn/logs/" + app + "/container_" + app.substring(12) + "_01_000001/stderr");
      if (Files.exists(amLog)) {
        ended = Files.readAllLines(amLog).stream().filter(l -> l.contains("went silent")).findFirst().orElse(null);
      }
    }
    assertTrue(ended != null, "the master logged the silence");
    Duration detected = Duration.between(cutAt, java.time.LocalTime.parse(ended.substring(0, 12)));
    System.out.println("cut -> attempt ended by the master: " + detected.toMillis() + " ms; -> every worker of "
        + "attempt 2 running: " + rerun.toMillis() + " ms");
    // a hang guard, not a speed target: YARN itself would take 10 minutes
    assertTrue(detected.compareTo(Duration.ofSeconds(60)) < 0, "ended " + detected + " after the cut: " + ended);

    List<String> ranOn = ranOn(app);
    assertEquals(3, ranOn.stream().distinct().count(), "the retry's workers, one per host: " + ranOn);
    assertTrue(!ranOn.contains(cut.name()), "none on the cut host: " + ranOn);
    // Healed, the cut host's executor hears that its attempt is over and ends the command.
    long pid = Long.parseLong(Files.readString(cut.scratch().resolve("tmp/cut-while-running.pid")).trim());
    io.muster.testing.Eventually.within(Duration.ofSeconds(30), "the cut host's command ended after the heal",
        () -> !io.muster.testing.Pids.running(pid));
  }

  /** Runs last: the cut host's NodeManager is silent to the ResourceManager while it is cut. */
  @Test
  @Order(Integer.MAX_VALUE)
  void aNodeCutBeforeTheGangFormsFailsTheAttemptAtTheGangTimeoutAndTheRetryRunsOnTheOtherHosts() throws Exception {
    Host cut;
    String app;
    HostProcess run;
    try (HostProcess submit = yarn.muster(rig.host(1), "submit-cut-before-gang", List.of("submit", "--worker-instances",
        "3", "--worker-memory", ONE_PER_HOST, "--max-attempts", "2", "--gang-timeout", "30s", "--command",
        "echo \"ran on $(hostname)\""))) {
      run = submit;
      app = applicationId(submit);
      // Cut a host other than the master's the moment its NodeManager is asked to start a worker's container:
      // the container starts, but its executor cannot register, and the NodeManager goes silent. The cut host is
      // a DataNode too: a container localizing the staged runtime from it waits the rig's 5 s
      // dfs.client.socket-timeout before it reads another replica, well inside the gang timeout.
      cut = workerHost(app, submit);
      cut.cutLink();
      try {
        assertEquals(0, submit.waitFor(JOB), submit.tail());
      } finally {
        cut.healLink();
      }
    }
    String out = String.join("\n", run.stdout());
    assertTrue(out.contains("SUCCEEDED: succeeded on attempt 2 of 2"), run.tail());
    // The container never registered (the start request got through), or its start call timed out (it did not).
    Matcher failed = Pattern.compile("attempt 1 of 2 failed: (the gang was not formed within the gang timeout of "
        + "30 s: .*missing: .*worker \\d \\(container container_\\S+ on " + cut.name() + " never registered; its "
        + "NodeManager at " + cut.name() + ":\\d+: no answer within 2000 ms \\(the node is down or cut off\\)\\)|worker \\d's "
        + "container container_\\S+ could not be started on " + cut.name() + ":\\d+: .*timeout)").matcher(out);
    assertTrue(failed.find(), run.tail());
    List<String> ranOn = ranOn(app);
    assertEquals(3, ranOn.size(), "every worker of the retry ran once: " + ranOn);
    assertEquals(3, ranOn.stream().distinct().count(), "one per host: " + ranOn);
    assertTrue(!ranOn.contains(cut.name()), "none on the cut host: " + ranOn);
  }

  /** A shell loop that waits until {@code file} exists, 60 s at most (every host sees the rig's directory). */
  private static String waitFor(Path file) {
    return "n=0; while [ ! -e " + file + " ] && [ $n -lt 600 ]; do sleep 0.1; n=$((n+1)); done";
  }

  /** The application's id, once {@code submit} has printed it. */
  private static String applicationId(HostProcess submit) {
    submit.awaitLine(Pattern.compile("application_\\d+_\\d+"), JOB, "the application's id");
    Matcher id = Pattern.compile("application_\\d+_\\d+").matcher(String.join("\n", submit.stdout()));
    assertTrue(id.find(), submit.tail());
    return id.group();
  }

  /** A host, not the master's, whose NodeManager is asked to start one of the application's worker containers. */
  private static Host workerHost(String app, HostProcess submit) throws Exception {
    String containers = "Start request for container_" + app.substring("application_".length()) + "_01_";
    Host master = awaitContainerStart(Pattern.compile(containers + "000001 "), null, submit);
    return awaitContainerStart(Pattern.compile(containers + "0+[2-9] "), master, submit);
  }

  /** The hosts the application's commands ran on, from their {@code ran on HOST} lines. */
  private static List<String> ranOn(String app) throws java.io.IOException {
    List<String> ranOn = new ArrayList<>();
    for (Host host : rig.hosts()) {
      for (Path stdout : Yarn.containerStdouts(host)) {
        if (stdout.toString().contains(app + "/")) {
          Files.readAllLines(stdout).stream().filter(l -> l.startsWith("ran on ")).forEach(l -> ranOn.add(l.substring(7)));
        }
      }
    }
    return ranOn;
  }

  /** The host (other than {@code except}) whose NodeManager first logs {@code startRequest}. */
  private static Host awaitContainerStart(Pattern startRequest, Host except, HostProcess submit) throws Exception {
    long deadline = System.nanoTime() + JOB.toNanos();
    while (System.nanoTime() < deadline && submit.isAlive()) {
      for (Host host : rig.hosts().subList(1, 5)) {
        if (host != except && yarn.nodeManager(host).stdout().stream().anyMatch(l -> startRequest.matcher(l).find())) {
          return host;
        }
      }
      Thread.sleep(50);
    }
    throw new IllegalStateException("no NodeManager logged " + startRequest + "\n" + submit.tail());
  }

  private static String last(List<String> lines) {
    return lines.isEmpty() ? "" : lines.get(lines.size() - 1);
  }
}
