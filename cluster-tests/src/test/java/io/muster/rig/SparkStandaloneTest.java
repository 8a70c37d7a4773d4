package io.muster.rig;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.muster.checkpoint.BundleReader;
import io.muster.checkpoint.CheckpointManager;
import io.muster.checkpoint.Tensor;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.Set;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.LocatedFileStatus;
import org.apache.hadoop.fs.RemoteIterator;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.MethodOrderer;
import org.junit.jupiter.api.Order;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestMethodOrder;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;
import org.tensorflow.Graph;
import org.tensorflow.Result;
import org.tensorflow.Session;
import org.tensorflow.op.Ops;
import org.tensorflow.op.train.Restore;
import org.tensorflow.types.TFloat32;
import org.tensorflow.types.TInt64;
import org.tensorflow.types.TString;
import org.tensorflow.types.family.TType;

/**
 * Muster's Spark launcher on a real Spark standalone cluster and real HDFS, across emulated hosts:
 * the NameNode and the Spark Master on host1, a DataNode and a one-core Spark Worker on each of
 * host2..host4; host5 is a spare that one test gives a Worker of its own. Jobs are submitted with
 * Spark's own {@code SparkSubmit} from host1 in client mode, as the README says, with Muster's jars
 * in {@code --jars}.
 */
@TestMethodOrder(MethodOrderer.OrderAnnotation.class)
class SparkStandaloneTest {

  private static final Duration JOB = Duration.ofMinutes(5);
  private static EmulatedHosts rig;
  private static Hdfs hdfs;
  private static SparkStandalone spark;
  private static Host client;

  @BeforeAll
  static void startCluster() {
    assumeTrue(EmulatedHosts.unavailable().isEmpty(), () -> "skipped: " + EmulatedHosts.unavailable().orElseThrow());
    rig = EmulatedHosts.create(Path.of(System.getProperty("java.io.tmpdir"), "rig-spark"), 5);
    List<Host> workers = rig.hosts().subList(1, 4);
    hdfs = Hdfs.start(rig, rig.host(1), workers);
    spark = SparkStandalone.start(rig, rig.host(1), workers, 1);
    client = rig.host(1);
  }

  @AfterAll
  static void stopCluster() {
    if (spark != null) {
      spark.close();
    }
    if (hdfs != null) {
      hdfs.close();
    }
    if (rig != null) {
      rig.close();
    }
  }

  /** spark-submit of Muster's jars with the cluster's usual settings for a gang of three one-core executors. */
  private static List<String> submitArgs(String master, String mainClass, List<String> appArgs) {
    return submitArgs(master, mainClass, 3, appArgs);
  }

  /** The same with {@code executors} one-core executors. */
  private static List<String> submitArgs(String master, String mainClass, int executors, List<String> appArgs) {
    List<String> args = new ArrayList<>(List.of("--master", master, "--deploy-mode", "client",
        "--executor-memory", "512m", "--total-executor-cores", String.valueOf(executors), "--executor-cores", "1",
        "--conf", "spark.dynamicAllocation.enabled=false",
        "--conf", "spark.ui.enabled=false",
        "--jars", String.join(",", Installed.musterJars().stream().map(Path::toString).toList()),
        "--class", mainClass, Installed.examplesJar().toString()));
    args.addAll(appArgs);
    return args;
  }

  @Test
  void theDemoTrainsAcrossThreeHostsWithItsOutputsOnHdfsAndItsProgressOnTheDriversConsole() throws Exception {
    FileSystem fs = hdfs.client();
    fs.copyFromLocalFile(new org.apache.hadoop.fs.Path(blobsCsv(rig.dir().resolve("blobs.csv")).toUri()),
        hdfs.path("/data/blobs.csv"));
    List<String> demo = List.of("--data", hdfs.uri() + "/data/blobs.csv", "--workers", "3", "--global-batch", "60",
        "--epochs", "5");
    List<String> args = new ArrayList<>(demo);
    args.addAll(List.of("--out", hdfs.uri() + "/jobs/demo"));
    int executorsBefore = executorDirs().size();

    HostProcess run;
    try (HostProcess p = spark.submit(client, "submit-demo", hdfs.conf(),
        submitArgs(spark.masterUrl(), "io.muster.examples.SparkDemo", args))) {
      run = p;
      assertEquals(0, p.waitFor(JOB), p.tail());
    }
    String result = last(run.stdout());
    Matcher accuracy = Pattern.compile("held-out accuracy (\\d\\.\\d{4}) on \\d+ rows of 3 classes; checkpoints in "
        + Pattern.quote(hdfs.uri() + "/jobs/demo/ckpt") + ", TensorBoard logs in "
        + Pattern.quote(hdfs.uri() + "/jobs/demo/logs")).matcher(result);
    assertTrue(accuracy.matches(), result);
    assertTrue(Double.parseDouble(accuracy.group(1)) > 0.9, result);

    // Every worker host ran one executor of this application.
    Set<String> hostsRan = new HashSet<>();
    for (Path dir : executorDirs()) {
      hostsRan.add(rig.dir().relativize(dir).getName(0).toString());
    }
    assertEquals(executorsBefore + 3, executorDirs().size(), "one executor per worker host: " + executorDirs());
    assertEquals(Set.of("host2", "host3", "host4"), hostsRan);

    // The chief's progress reached the driver's console, which is as quiet as ./muster demo's.
    List<String> epochs = run.stderr().stream().filter(l -> l.matches(".*INFO  epoch [1-5]/5: loss .*")).toList();
    assertEquals(5, epochs.size(), String.join("\n", run.stderr()));
    assertTrue(run.stderr().size() <= 12, "a quiet console: " + String.join("\n", run.stderr()));

    // The chief alone wrote, and TensorFlow restores its last checkpoint.
    assertEquals(List.of(), files(fs, hdfs.path("/jobs/demo")).stream().filter(p -> p.contains("workertemp_")).toList());
    List<String> events = files(fs, hdfs.path("/jobs/demo/logs/train"));
    assertEquals(1, events.size(), "one tfevents file, the chief's: " + events);
    org.apache.hadoop.fs.Path prefix = CheckpointManager.latestCheckpoint(fs, hdfs.path("/jobs/demo/ckpt")).orElseThrow();
    assertEquals("ckpt-5", prefix.getName());
    Map<String, Tensor> muster = BundleReader.open(fs, prefix).readAll();
    Path local = Files.createDirectories(rig.dir().resolve("restored"));
    for (String suffix : List.of(".index", ".data-00000-of-00001")) {
      fs.copyToLocalFile(false, prefix.suffix(suffix), new org.apache.hadoop.fs.Path(local.resolve("ckpt-5" + suffix)
          .toUri()), true);
    }
    try (Graph g = new Graph(); Session session = new Session(g)) {
      Ops tf = Ops.create(g);
      List<Class<? extends TType>> types = List.of(TFloat32.class, TFloat32.class, TInt64.class);
      Restore restore = Restore.create(tf.scope(), tf.constant(local.resolve("ckpt-5").toString()),
          tf.constantOf(TString.vectorOf("weights", "bias", "epoch")), tf.constantOf(TString.vectorOf("", "", "")),
          types);
      Session.Runner runner = session.runner();
      restore.tensors().forEach(runner::fetch);
      try (Result restored = runner.run()) {
        assertArrayEquals(muster.get("weights").floats(), floats((TFloat32) restored.get(0)));
        assertArrayEquals(muster.get("bias").floats(), floats((TFloat32) restored.get(1)));
        assertEquals(5L, ((TInt64) restored.get(2)).getLong());
      }
    }

    // The same job on Spark local[3] on one host reaches the same model.
    List<String> localArgs = new ArrayList<>(demo);
    localArgs.addAll(List.of("--out", hdfs.uri() + "/jobs/demo-local"));
    try (HostProcess p = spark.submit(client, "submit-demo-local", hdfs.conf(),
        submitArgs("local[3]", "io.muster.examples.SparkDemo", localArgs))) {
      assertEquals(0, p.waitFor(JOB), p.tail());
      assertEquals(result.replace("/jobs/demo/", "/jobs/demo-local/"), last(p.stdout()));
    }
  }

  @Test
  void aDataNodeKilledWhileTheChiefSavesLosesNoCheckpoint() throws Exception {
    hdfs.client().copyFromLocalFile(new org.apache.hadoop.fs.Path(blobsCsv(rig.dir().resolve("blobs.csv")).toUri()),
        hdfs.path("/data/blobs.csv"));
    String out = hdfs.uri() + "/jobs/datanode-killed";
    // a checkpoint and a backup every epoch: the kill lands in or between saves, which follow one another
    try (HostProcess p = spark.submit(client, "submit-datanode-killed", hdfs.conf(),
        submitArgs(spark.masterUrl(), "io.muster.examples.SparkDemo", List.of("--data", hdfs.uri() + "/data/blobs.csv",
            "--workers", "3", "--global-batch", "60", "--epochs", "15", "--out", out)))) {
      p.awaitLine(Pattern.compile("INFO  epoch 3/15: "), JOB, "epoch 3");
      hdfs.killDataNode(rig.host(4));
      try {
        assertEquals(0, p.waitFor(JOB), p.tail());
        assertTrue(last(p.stdout()).startsWith("held-out accuracy "), p.tail());
      } finally {
        hdfs.restartDataNode(rig.host(4));
      }
    }
    try (HostProcess p = client.start("checkpoint-verify", checkpointVerify(out + "/ckpt"), Map.of())) {
      assertEquals(0, p.waitFor(JOB), p.tail());
      assertTrue(String.join("\n", p.stdout()).contains("ckpt-15"), p.tail());
    }
  }

  @Test
  void everyTasksTfConfigNamesTheHostsTheTasksRunOn() throws Exception {
    String script = "echo \"$(hostname) $TF_CONFIG\"";
    HostProcess run;
    try (HostProcess p = spark.submit(client, "submit-tf-config", null,
        submitArgs(spark.masterUrl(), "io.muster.examples.SparkRun", List.of("--workers", "3", "--", "sh", "-c",
            script)))) {
      run = p;
      assertEquals(0, p.waitFor(JOB), p.tail());
    }
    // [worker 1] host3 {"cluster": {"worker": ["198.18.7.2:40123", "198.18.7.3:36411", ...]}, "task": ...}
    // (Spark gives a barrier task its executor's address, which is where the task's server listens)
    Pattern line = Pattern.compile(".*\\[worker (\\d)] (host\\d) (\\{.*})");
    List<Matcher> lines = run.stderr().stream().map(line::matcher).filter(Matcher::matches).toList();
    assertEquals(3, lines.size(), String.join("\n", run.stderr()));
    Map<String, String> addressOf = new java.util.HashMap<>();
    rig.hosts().forEach(h -> addressOf.put(h.name(), h.address()));
    Set<String> ranOn = new HashSet<>();
    for (Matcher m : lines) {
      int index = Integer.parseInt(m.group(1));
      List<String> workers = workerAddresses(m.group(3));
      assertEquals(3, workers.size(), m.group(3));
      String own = workers.get(index).split(":")[0];
      assertTrue(own.equals(m.group(2)) || own.equals(addressOf.get(m.group(2))),
          "the task's own entry names its own host, " + m.group(2) + ": " + m.group());
      ranOn.add(m.group(2));
    }
    assertEquals(Set.of("host2", "host3", "host4"), ranOn);
    Set<String> named = new HashSet<>();
    lines.forEach(m -> workerAddresses(m.group(3)).forEach(a -> named.add(a.split(":")[0])));
    assertTrue(Set.of(addressOf.get("host2"), addressOf.get("host3"), addressOf.get("host4")).equals(named)
        || Set.of("host2", "host3", "host4").equals(named), "each worker host once, no loopback: " + named);
  }

  @Test
  void aLocalOutOrDataWithTheClusterMasterIsRefusedBeforeAnyTaskStarts() throws Exception {
    int executorsBefore = executorDirs().size();
    try (HostProcess p = spark.submit(client, "submit-local-out", hdfs.conf(),
        submitArgs(spark.masterUrl(), "io.muster.examples.SparkDemo", List.of("--out", "/tmp/demo-out")))) {
      assertEquals(2, p.waitFor(JOB), p.tail());
      assertEquals("muster demo: --out /tmp/demo-out is a path on this machine, but the tasks run on the hosts of "
          + spark.masterUrl() + ", which do not see it; give a URI every host reaches, such as " + hdfs.uri()
          + "/jobs/demo-out (fs.defaultFS), or file:///tmp/demo-out if every host mounts that directory",
          last(p.stderr()));
    }
    try (HostProcess p = spark.submit(client, "submit-local-data", null,
        submitArgs(spark.masterUrl(), "io.muster.examples.SparkRun", List.of("--data", Installed.examplesJar()
            .toString(), "--", "true")))) {
      assertEquals(2, p.waitFor(JOB), p.tail());
      assertTrue(last(p.stderr()).startsWith("muster spark-run: --data " + Installed.examplesJar() + " is a path on this "
          + "machine, but the tasks run on the hosts of " + spark.masterUrl()), last(p.stderr()));
      assertTrue(last(p.stderr()).contains("(no fs.defaultFS is configured here: is HADOOP_CONF_DIR set?)"),
          last(p.stderr()));
    }
    assertEquals(executorsBefore, executorDirs().size(), "no executor started");
  }

  @Test
  void sparkRunOfRealTensorFlowMultiWorkerMirroredStrategyAcrossThreeHosts() throws Exception {
    Path python = io.muster.testing.PythonTensorFlow.python();
    Path script = Installed.root().resolve("cli/src/test/resources/mwms_train.py"); // YarnTest runs it too
    // TensorFlow for Python writes hdfs:// only with tensorflow-io: the output directory is each host's own
    List<String> args = new ArrayList<>(List.of("--files", script.toString()));
    args.addAll(submitArgs(spark.masterUrl(), "io.muster.examples.SparkRun", List.of("--workers", "3", "--out",
        "file:///tmp/mwms-out", "--", python.toString(), "mwms_train.py")));
    HostProcess run;
    try (HostProcess p = spark.submit(client, "submit-mwms", null, args)) {
      run = p;
      assertEquals(0, p.waitFor(JOB), p.tail());
    }
    List<String> digests = run.stderr().stream().filter(l -> l.contains("] weights-sha256 "))
        .map(l -> l.substring(l.indexOf("weights-sha256 ")).split(" ")[1]).toList();
    assertEquals(3, digests.size(), String.join("\n", run.stderr()));
    assertEquals(1, digests.stream().distinct().count(), "identical weights on every host: " + digests);
    List<String> withCheckpoint = rig.hosts().stream()
        .filter(h -> Files.exists(h.scratch().resolve("tmp/mwms-out/checkpoint"))).map(Host::name).toList();
    assertEquals(1, withCheckpoint.size(), "the chief's checkpoint, on its own host alone: " + withCheckpoint);
    for (Host host : rig.hosts()) {
      Path out = host.scratch().resolve("tmp/mwms-out");
      if (Files.isDirectory(out)) {
        try (Stream<Path> files = Files.list(out)) {
          assertTrue(files.noneMatch(p -> p.getFileName().toString().startsWith("workertemp")), host + ": " + out);
        }
      }
    }
  }

  /**
   * A worker host cut while the demo trains, with a spare host (a fourth one-core Worker on host5,
   * four executors for a gang of three); the victim is worker 1, or the chief (worker 0, the
   * coordination leader, which saves a checkpoint and a backup every epoch, so the cut catches it
   * writing). The tasks that lost the cut one fail the gang within seconds; the driver removes the
   * cut host's executor, which Spark would count busy, and whose shuffle outputs (the repartitioned
   * rows) it would serve the re-run, for 120 s; the re-run takes the three free slots on the healthy
   * hosts and resumes from the backup. The cut is healed once the re-run has trained, and saved, an
   * epoch: the old attempt's task has ended, it never saved again, and the checkpoint directory's
   * writer is attempt 2. The job succeeds, its last checkpoint verifies, and the driver ends as soon
   * as its job has. The cut host may be a DataNode: the HDFS client's socket timeout is 5 s, as the
   * README advises where hosts can go silent, and a task that waits for it before the re-run's first
   * collective holds the others up without failing them (collectives' keepalives).
   */
  @ParameterizedTest(name = "worker {0} cut")
  @ValueSource(ints = {1, 0})
  @Order(Integer.MAX_VALUE - 2)
  void withASpareHostAHostCutWhileTheDemoTrainsIsRecoveredOnTheHealthyHostsFromTheBackup(int victim) throws Exception {
    Host spare = rig.host(5);
    spark.startWorker(spare, 1);
    hdfs.client().copyFromLocalFile(new org.apache.hadoop.fs.Path(blobsCsv(rig.dir().resolve("blobs.csv")).toUri()),
        hdfs.path("/data/blobs.csv"));
    String out = hdfs.uri() + "/jobs/spare-host-" + victim;
    List<String> args = new ArrayList<>(List.of("--conf", "spark.hadoop.dfs.client.socket-timeout=5000"));
    args.addAll(submitArgs(spark.masterUrl(), "io.muster.examples.SparkDemo", 4, List.of("--data", hdfs.uri()
        + "/data/blobs.csv", "--workers", "3", "--global-batch", "60", "--epochs", "50", "--out", out)));
    Set<Path> before = new HashSet<>(executorDirs());
    HostProcess run;
    Host cut;
    long cutAt;
    long healedAt;
    Duration failedAfter;
    Duration trainingAgainAfter;
    Duration exitedAfterResult;
    try (HostProcess p = spark.submit(client, "submit-spare-host-" + victim, hdfs.conf(), args)) {
      run = p;
      p.awaitLine(Pattern.compile("INFO  epoch 5/50: "), JOB, "epoch 5");
      cut = hostLogging(before, "worker " + victim + ": MultiWorkerMirroredStrategy ready").get(0);
      long cutNanos = System.nanoTime();
      cutAt = System.currentTimeMillis();
      cut.cutLink();
      try {
        int failed = awaitLineFrom(p, 0, Pattern.compile("attempt 1 of 2 failed: .*re-running the gang"), "attempt 1's "
            + "failure");
        failedAfter = Duration.ofNanos(System.nanoTime() - cutNanos);
        awaitLineFrom(p, failed + 1, Pattern.compile("INFO  epoch \\d+/50: "), "attempt 2's first epoch");
        trainingAgainAfter = Duration.ofNanos(System.nanoTime() - cutNanos);
      } finally {
        cut.healLink();
        healedAt = System.currentTimeMillis();
      }
      p.awaitLine(Pattern.compile("^held-out accuracy "), JOB, "the job's result");
      long result = System.nanoTime();
      assertEquals(0, p.waitFor(JOB), p.tail());
      exitedAfterResult = Duration.ofNanos(System.nanoTime() - result);
      io.muster.testing.Eventually.within(Duration.ofSeconds(120), "the Master hearing " + cut + "'s Worker again",
          () -> spark.lastHeartbeat(cut) > healedAt);
    } finally {
      spare.killAll(); // the later tests count on three Workers
      io.muster.testing.Eventually.within(Duration.ofSeconds(60), "the Master dropping host5's Worker",
          () -> spark.lastHeartbeat(spare) < 0);
    }
    List<String> cutLog = Files.readAllLines(executorLog(before, cut));
    // attempt 2's gang ready: the last of the six strategies' starts, in the executors' logs
    long readyAgain = executorLines(before, "MultiWorkerMirroredStrategy ready, replica").stream()
        .mapToLong(SparkStandaloneTest::loggedAt).max().orElseThrow();
    long taskEnded = loggedAt(cutLog.stream().filter(l -> l.contains("ERROR Executor: Exception in task")
        || l.contains("killed task")).findFirst().orElseThrow(() -> new AssertionError("no end of " + cut
        + "'s task in its executor's log")));
    System.out.println("worker " + victim + " on " + cut + " cut with a spare host: attempt 1 failed "
        + failedAfter.toMillis() + " ms after the cut, attempt 2's gang was ready " + (readyAgain - cutAt) + " ms "
        + "after it (log time, to the second) and had trained an epoch " + trainingAgainAfter.toMillis()
        + " ms after it; the cut task ended " + (taskEnded - cutAt) + " ms after the cut (log time, to the second); "
        + "the driver exited " + exitedAfterResult.toMillis() + " ms after its result");
    // the failure names the cut task and its address: the coordination leader declared it failed
    // ("stopped sending heartbeats for 10 s): /job:worker/replica:0/task:1 (198.18.3.5:35955)"), or the
    // others lost the leader ("coordination leader worker 0 at 198.18.3.5:35955: no answer")
    String failure = run.stderr().stream().filter(l -> l.contains("attempt 1 of 2 failed: ")).findFirst().orElse("");
    assertTrue((victim == 0 ? failure.contains("coordination leader worker 0 at " + cut.address() + ":")
        : failure.contains("task:" + victim + " (" + cut.address() + ":")) && failure.endsWith("; re-running the gang"),
        run.tail());
    // a host lost to the cluster: the attempt does not count
    assertTrue(Pattern.compile("attempt 2 \\(1 of 2 that count\\): executor \\d+ on " + cut.name() + " still runs a "
        + "task of the failed "
        + "gang and does not answer \\(no answer within 2000 ms\\); removing it").matcher(String.join("\n",
        run.stderr())).find(), run.tail());
    Matcher resumed = Pattern.compile("the gang ran 2 times; the last run resumed from the backup at epoch (\\d+)")
        .matcher(String.join("\n", run.stdout()));
    assertTrue(resumed.find() && Integer.parseInt(resumed.group(1)) >= 5, run.tail());
    assertTrue(last(run.stdout()).startsWith("held-out accuracy "), run.tail());
    // attempt 2's three tasks ran on the healthy hosts: the cut host's executor logged its strategy's start once
    List<Host> ready = hostLogging(before, "MultiWorkerMirroredStrategy ready, replica");
    assertEquals(6, ready.size(), "three tasks an attempt: " + ready);
    assertEquals(1, ready.stream().filter(cut::equals).count(), "the cut host ran attempt 1 alone: " + ready);
    // no stale writer: the cut task ended by itself within seconds of the heal at the latest, never
    // saved after the cut, and the checkpoints' writer is attempt 2 (".muster-writer": "<run> <attempt>")
    assertTrue(taskEnded < healedAt + 6_000, "the cut task ended " + (taskEnded - healedAt) + " ms after the heal");
    List<Long> saves = cutLog.stream().filter(l -> l.contains("INFO CheckpointManager: saved checkpoint"))
        .map(SparkStandaloneTest::loggedAt).toList();
    assertTrue(saves.stream().allMatch(t -> t < cutAt + 1_000), "saves on " + cut + " at " + saves + ", cut at " + cutAt);
    try (var in = hdfs.client().open(hdfs.path("/jobs/spare-host-" + victim + "/ckpt/.muster-writer"))) {
      String writer = new String(in.readAllBytes(), java.nio.charset.StandardCharsets.UTF_8).strip();
      assertTrue(writer.endsWith(" 1"), "the checkpoints' writer: " + writer);
    }
    // hang guards, not speed targets (Spark's own detection takes spark.network.timeout, 120 s): the figures are
    // in the README
    assertTrue(failedAfter.compareTo(Duration.ofSeconds(20)) < 0, "attempt 1 failed " + failedAfter + " after the cut");
    assertTrue(readyAgain < cutAt + 30_000, "attempt 2's gang was ready " + (readyAgain - cutAt) + " ms after the cut");
    // its first epoch's saves may wait for HDFS to leave the cut DataNode out of their pipelines (10 s each)
    assertTrue(trainingAgainAfter.compareTo(Duration.ofSeconds(45)) < 0, "attempt 2 trained " + trainingAgainAfter
        + " after the cut");
    // the cut executor answers no cleanup: with Spark's blocking cleaner the driver's stop waited 120 s for it
    assertTrue(exitedAfterResult.compareTo(Duration.ofSeconds(30)) < 0, "the driver exited " + exitedAfterResult
        + " after its result");
    try (HostProcess p = client.start("checkpoint-verify-spare-host-" + victim, checkpointVerify(out + "/ckpt"),
        Map.of())) {
      assertEquals(0, p.waitFor(JOB), p.tail());
      assertTrue(String.join("\n", p.stdout()).contains("ckpt-50"), p.tail());
    }
  }

  /** The log of the executor started after {@code before} on {@code host} that ran a task of the gang. */
  private static Path executorLog(Set<Path> before, Host host) throws Exception {
    for (Path dir : executorDirs()) {
      Path stderr = dir.resolve("stderr");
      if (!before.contains(dir) && dir.startsWith(host.scratch()) && Files.exists(stderr)
          && Files.readString(stderr).contains("MultiWorkerMirroredStrategy ready")) {
        return stderr;
      }
    }
    throw new AssertionError("no executor of the run on " + host + " ran a task of the gang");
  }

  /** When a Spark log line was written (its "yy/MM/dd HH:mm:ss" prefix, this machine's time zone), in epoch ms. */
  private static long loggedAt(String line) {
    return java.time.LocalDateTime.parse(line.substring(0, 17), java.time.format.DateTimeFormatter.ofPattern(
        "yy/MM/dd HH:mm:ss")).atZone(java.time.ZoneId.systemDefault()).toInstant().toEpochMilli();
  }

  /** {@code muster checkpoint verify DIR} with the rig's HDFS configuration. */
  private static List<String> checkpointVerify(String dir) {
    return List.of(Installed.java(), "-Xmx256m", "-cp", Installed.joined(Stream.concat(Stream.of(hdfs.conf()),
        Installed.cli().stream()).toList()), "io.muster.cli.Muster", "checkpoint", "verify", dir);
  }

  /** The lines with {@code text} in the logs of the executors started after {@code before}. */
  private static List<String> executorLines(Set<Path> before, String text) throws Exception {
    List<String> lines = new ArrayList<>();
    for (Path dir : executorDirs()) {
      Path stderr = dir.resolve("stderr");
      if (!before.contains(dir) && Files.exists(stderr)) {
        Files.readAllLines(stderr).stream().filter(l -> l.contains(text)).forEach(lines::add);
      }
    }
    return lines;
  }

  /** The host of each executor started after {@code before} whose log has {@code text}, once per line with it. */
  private static List<Host> hostLogging(Set<Path> before, String text) throws Exception {
    List<Host> hosts = new ArrayList<>();
    for (Path dir : executorDirs()) {
      Path stderr = dir.resolve("stderr");
      if (!before.contains(dir) && Files.exists(stderr)) {
        Host host = rig.hosts().stream().filter(h -> dir.startsWith(h.scratch())).findFirst().orElseThrow();
        Files.readAllLines(stderr).stream().filter(l -> l.contains(text)).forEach(l -> hosts.add(host));
      }
    }
    return hosts;
  }

  /** The index of the first line of {@code p}'s stderr from {@code from} on that has {@code line}. */
  private static int awaitLineFrom(HostProcess p, int from, Pattern line, String what) throws Exception {
    long deadline = System.nanoTime() + JOB.toNanos();
    while (System.nanoTime() < deadline && p.isAlive()) {
      List<String> err = p.stderr();
      for (int i = from; i < err.size(); i++) {
        if (line.matcher(err.get(i)).find()) {
          return i;
        }
      }
      Thread.sleep(50);
    }
    throw new IllegalStateException("no " + what + "\n" + p.tail());
  }

  /**
   * A worker host cut while spark-run's gang runs, with no spare host: the driver hears nothing from
   * host3's task and fails the gang within seconds (Spark itself would wait for spark.network.timeout);
   * the re-run finds Spark still counting host3's slot busy, says so, waits spark.muster.slotTimeout
   * for it, then fails in one line naming every executor. Before the last test; the cut is healed
   * before the Master's 60 s worker timeout.
   */
  @Test
  @Order(Integer.MAX_VALUE - 1)
  void aHostCutWhileTheGangRunsFailsItWithinSecondsAndAReRunWithoutTheSlotFailsAtTheSlotTimeout() throws Exception {
    Host cut = rig.host(3);
    List<String> args = new ArrayList<>(List.of("--conf", "spark.muster.slotTimeout=10s"));
    args.addAll(submitArgs(spark.masterUrl(), "io.muster.examples.SparkRun", List.of("--workers", "3",
        "--max-attempts", "2", "--", "sh", "-c", "echo \"started on $(hostname)\"; sleep 120")));
    HostProcess run;
    Duration failedAfter;
    Duration endedAfter;
    try (HostProcess p = spark.submit(client, "submit-cut-while-running", null, args)) {
      run = p;
      for (String host : List.of("host2", "host3", "host4")) {
        p.awaitLine(Pattern.compile("started on " + host), JOB, "the command running on " + host);
      }
      long cutAt = System.nanoTime();
      cut.cutLink();
      try {
        p.awaitLine(Pattern.compile("attempt 1 of 2 failed: .*re-running the gang"), Duration.ofMinutes(2),
            "attempt 1's failure");
        failedAfter = Duration.ofNanos(System.nanoTime() - cutAt);
        assertEquals(1, p.waitFor(Duration.ofMinutes(2)), p.tail());
        endedAfter = Duration.ofNanos(System.nanoTime() - cutAt);
      } finally {
        cut.healLink();
        // the next test needs host3's Worker: wait until the Master hears it again, before its 60 s timeout
        long healed = System.currentTimeMillis();
        io.muster.testing.Eventually.within(Duration.ofSeconds(120), "the Master hearing host3's Worker again",
            () -> spark.lastHeartbeat(cut) > healed);
      }
    }
    System.out.println("cut -> attempt 1 failed: " + failedAfter.toMillis() + " ms; -> the run failed: "
        + endedAfter.toMillis() + " ms");
    String err = String.join("\n", run.stderr());
    assertTrue(Pattern.compile("attempt 1 of 2 failed: worker \\d on host3 \\(executor \\d+\\) went silent: no word "
        + "from it for 10 s \\(a member went silent; this attempt does not count\\)").matcher(err).find(), run.tail());
    assertTrue(Pattern.compile("attempt 2 \\(1 of 2 that count\\): the gang needs 3 free task slots at once, 2 are free "
        + "\\(executors: .*"
        + "host3:\\d+ not answering \\(no answer within 2000 ms\\).*\\); waiting up to 10 s for them").matcher(err).find(),
        run.tail());
    String failure = last(run.stderr());
    assertTrue(Pattern.compile("muster spark-run: training failed on attempt 2 \\(1 of 2 that count\\): the gang needs 3 "
        + "free task slots "
        + "at once, and 2 were free after 10 s \\(spark\\.muster\\.slotTimeout\\): executors: .*host3:\\d+ not answering "
        + "\\(no answer within 2000 ms\\)").matcher(failure).find(), failure);
    // hang guards, not speed targets: Spark's own detection takes spark.network.timeout (120 s)
    assertTrue(failedAfter.compareTo(Duration.ofSeconds(30)) < 0, "attempt 1 failed " + failedAfter + " after the cut");
  }

  /** Runs last: the cut host's Worker may be dropped by the Master while it is cut. */
  @Test
  @Order(Integer.MAX_VALUE)
  void aHostCutBeforeTheGangFormsFailsTheRunAtTheGangTimeoutNamingTheHostAndWhatItAnswered() throws Exception {
    Host cut = rig.host(3);
    List<String> args = new ArrayList<>(List.of("--conf", "spark.muster.gangTimeout=30s"));
    args.addAll(submitArgs(spark.masterUrl(), "io.muster.examples.SparkRun", List.of("--workers", "3", "--", "sh", "-c",
        "echo the command ran")));
    // The driver submits the gang once three executors have registered; cut host3 the moment its executor has
    // registered its block manager, before it can take a task. Its task may still slip through first (the gang
    // then forms and the run succeeds): the scenario is tried again, up to three times.
    for (int attempt = 1; ; attempt++) {
      Set<Path> before = new HashSet<>(executorDirs());
      try (HostProcess p = spark.submit(client, "submit-cut-before-gang-" + attempt, null, args)) {
        awaitRegisteredExecutor(cut, before, p);
        cut.cutLink();
        int exit;
        try {
          // a bound with room: once in a few runs the driver took over a minute more to end after the
          // gang timeout's failure (inside Spark, with the cut executor still registered)
          exit = p.waitFor(Duration.ofMinutes(4));
        } finally {
          cut.healLink();
        }
        if (exit == 0 && attempt < 3) {
          continue; // the task reached host3 before the cut
        }
        assertEquals(1, exit, p.tail());
        // Spark started host3's task and it never joined, or (the cut came before the executor told the driver
        // it was ready) Spark had no slot there: either way the line names host3 and its silence.
        String failure = last(p.stderr());
        assertTrue(failure.startsWith("muster spark-run: training failed on attempt 1 of 1: the gang was not formed "
            + "within the gang timeout of 30 s: "), failure);
        assertTrue(Pattern.compile("(worker \\d was started on host3 \\(executor \\d+\\) \\d+ s ago and has not "
            + "joined; its executor at host3:\\d+: no answer within 2000 ms \\(the host is down or cut off from the "
            + "driver\\))|(not started by Spark, .* host3:\\d+ not answering \\(no answer within 2000 ms\\))")
            .matcher(failure).find(), failure);
        assertTrue(p.stderr().stream().noneMatch(l -> l.contains("the command ran")), "no command started: " + p.tail());
        return;
      }
    }
  }

  /** Waits until an executor started after {@code before} on {@code host} has registered with its driver. */
  private static void awaitRegisteredExecutor(Host host, Set<Path> before, HostProcess driver) throws Exception {
    long deadline = System.nanoTime() + JOB.toNanos();
    while (System.nanoTime() < deadline && driver.isAlive()) {
      for (Path dir : executorDirs()) {
        Path stderr = dir.resolve("stderr");
        if (!before.contains(dir) && dir.startsWith(host.scratch()) && Files.exists(stderr)
            && Files.readString(stderr).contains("Initialized BlockManager")) {
          return;
        }
      }
      Thread.sleep(10);
    }
    throw new IllegalStateException("no executor of the run registered on " + host + "\n" + driver.tail());
  }

  private static List<String> workerAddresses(String tfConfig) {
    Matcher m = Pattern.compile("\"worker\"\\s*:\\s*\\[([^]]*)]").matcher(tfConfig);
    assertTrue(m.find(), tfConfig);
    return Stream.of(m.group(1).split(",")).map(s -> s.strip().replace("\"", "")).toList();
  }

  private static List<Path> executorDirs() throws Exception {
    List<Path> dirs = new ArrayList<>();
    for (Host host : rig.hosts()) {
      Path work = host.scratch().resolve("work");
      if (Files.isDirectory(work)) {
        try (Stream<Path> apps = Files.list(work)) {
          for (Path app : apps.toList()) {
            try (Stream<Path> executors = Files.list(app)) {
              dirs.addAll(executors.toList());
            }
          }
        }
      }
    }
    return dirs;
  }

  private static List<String> files(FileSystem fs, org.apache.hadoop.fs.Path dir) throws Exception {
    List<String> out = new ArrayList<>();
    RemoteIterator<LocatedFileStatus> it = fs.listFiles(dir, true);
    while (it.hasNext()) {
      out.add(it.next().getPath().toUri().getPath());
    }
    return out;
  }

  private static float[] floats(TFloat32 t) {
    float[] out = new float[(int) t.size()];
    for (int i = 0; i < out.length; i++) {
      out[i] = t.getFloat(t.shape().numDimensions() == 1 ? new long[] {i} : index(t.shape().asArray(), i));
    }
    return out;
  }

  private static long[] index(long[] shape, int flat) {
    long[] idx = new long[shape.length];
    for (int d = shape.length - 1; d >= 0; d--) {
      idx[d] = flat % shape[d];
      flat /= (int) shape[d];
    }
    return idx;
  }

  private static String last(List<String> lines) {
    return lines.isEmpty() ? "" : lines.get(lines.size() - 1);
  }

  /** 900 rows of 3 well separated Gaussian blobs in 8 dimensions, with a header: label,f0..f7. */
  static Path blobsCsv(Path file) throws Exception {
    Random random = new Random(11);
    StringBuilder csv = new StringBuilder("label,f0,f1,f2,f3,f4,f5,f6,f7\n");
    for (int row = 0; row < 900; row++) {
      int label = row % 3;
      csv.append(label);
      for (int f = 0; f < 8; f++) {
        csv.append(',').append(String.format(java.util.Locale.ROOT, "%.4f", (f % 3 == label ? 2.0 : 0.0) + random.nextGaussian()));
      }
      csv.append('\n');
    }
    return Files.writeString(file, csv);
  }
}
