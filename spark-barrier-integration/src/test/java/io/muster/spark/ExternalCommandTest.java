package io.muster.spark;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.muster.cluster.ClusterSpec;
import io.muster.cluster.HostPort;
import io.muster.cluster.TfConfig;
import io.muster.launch.Gang;
import io.muster.launch.GangSpec;
import io.muster.launch.Rerun;
import io.muster.launch.TaskEnvironment;
import io.muster.launch.TaskProcess.Stream;
import io.muster.rpc.JobToken;
import io.muster.testing.ChildJvm;
import io.muster.testing.Eventually;
import io.muster.testing.Pids;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.sql.Date;
import java.time.Duration;
import java.time.LocalDate;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.stream.Collectors;
import java.util.stream.IntStream;
import org.apache.spark.SparkFiles;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructType;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/** External-command mode in Spark local[4], the command a real child JVM ({@link ShardCheck}). */
class ExternalCommandTest {

  private static final Duration LIMIT = Duration.ofSeconds(30);
  private static SparkSession spark;

  @TempDir Path dir;
  private final List<CommandLine> lines = new CopyOnWriteArrayList<>();

  @BeforeAll
  static void start() {
    spark = SparkSession.builder().master("local[4]").appName("muster-command-test")
        .config("spark.ui.enabled", "false").config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1").getOrCreate();
  }

  @AfterAll
  static void stop() {
    spark.stop();
  }

  private static ExternalCommand shardCheck(String... args) {
    return ExternalCommand.of(ChildJvm.command("64m", ShardCheck.class, List.of(args)));
  }

  private BarrierTrainer trainer(int workers, int attempts) {
    return BarrierTrainer.builder().numWorkers(workers).maxAttempts(attempts).commandLogs(lines::add).build();
  }

  private List<String> texts(String prefix) {
    return lines.stream().map(CommandLine::text).filter(t -> t.startsWith(prefix)).map(t -> t.substring(prefix.length()))
        .collect(Collectors.toList());
  }

  private static final StructType SCHEMA = new StructType()
      .add("id", DataTypes.LongType, false).add("label", DataTypes.IntegerType, false)
      .add("x", DataTypes.DoubleType, false).add("name", DataTypes.StringType, true)
      .add("flag", DataTypes.BooleanType, false).add("vec", DataTypes.createArrayType(DataTypes.FloatType), false)
      .add("bin", DataTypes.BinaryType, false).add("day", DataTypes.DateType, false);

  private static Dataset<Row> rows(int n) {
    List<Row> rows = IntStream.range(0, n).mapToObj(i -> RowFactory.create((long) i, i % 3, i * 0.1,
        i % 7 == 0 ? null : "n" + i + "ñ", i % 2 == 0, floats(i), ("b" + i).getBytes(StandardCharsets.UTF_8),
        Date.valueOf(LocalDate.ofEpochDay(19000 + i)))).toList();
    return spark.createDataFrame(rows, SCHEMA);
  }

  private static List<Float> floats(int i) {
    return IntStream.range(0, i % 3).mapToObj(k -> i + k / 2f).toList();
  }

  /** What ShardCheck prints for row i, computed here from the values the DataFrame was made of. */
  private static String expected(int i) {
    return "id=" + i + " label=" + (i % 3) + " x=" + (float) (i * 0.1) + " name=" + (i % 7 == 0 ? "-" : "n" + i + "ñ")
        + " flag=" + (i % 2 == 0 ? 1 : 0) + " vec=" + floats(i) + " bin=b" + i + " day=" + (19000 + i);
  }

  @Test
  void everyTaskGetsItsTfConfigAndItsShardAsTfExamplesAndTheChiefsResultComesBack() throws Exception {
    Optional<byte[]> result = trainer(4, 1).run(rows(100), shardCheck("check"));

    assertArrayEquals("chief of attempt 0".getBytes(StandardCharsets.UTF_8), result.orElseThrow());
    List<String> seen = texts("row ");
    List<String> want = IntStream.range(0, 100).mapToObj(ExternalCommandTest::expected).toList();
    assertEquals(want.stream().sorted().toList(), seen.stream().sorted().toList(), "every row once, every value kept");
    assertEquals(100, texts("shard rows ").stream().mapToInt(Integer::parseInt).sum());

    List<CommandLine> configs = lines.stream().filter(l -> l.text().startsWith("tf_config ")).toList();
    assertEquals(4, configs.size(), lines.toString());
    ClusterSpec cluster = TfConfig.parse(configs.get(0).text().substring("tf_config ".length())).cluster();
    assertEquals(4, cluster.numTasks("worker"));
    for (CommandLine line : configs) {
      TfConfig config = TfConfig.parse(line.text().substring("tf_config ".length()));
      assertEquals(cluster, config.cluster(), "the same cluster on every task");
      assertEquals(line.task(), config.requireTask().toString(), "each line is prefixed with its own task");
      assertTrue(cluster.taskAddress(config.requireTask()).startsWith("127.0.0.1:"));
    }
    for (int i = 0; i < 4; i++) {
      assertTrue(lines.contains(new CommandLine("worker " + i, Stream.STDOUT,
          "cuda [] attempt 0 chief " + (i == 0) + " of 4")), lines.toString());
      assertTrue(lines.contains(new CommandLine("worker " + i, Stream.STDERR, "a line on stderr from worker " + i)));
    }
    try (var left = Files.list(Path.of(SparkFiles.getRootDirectory()))) {
      assertEquals(List.of(), left.filter(p -> p.getFileName().toString().startsWith("muster-worker-")).toList(),
          "the tasks' work directories are deleted");
    }
  }

  /** TMPDIR is tmp in the task's private directory, deleted with it, unless the job names one. */
  @Test
  void aCommandsTemporaryFilesGoWithItsTask(@TempDir Path own) {
    assumeTrue(System.getenv("TMPDIR") == null, "this JVM's environment names a TMPDIR, which the commands keep");
    String mktemp = "f=$(mktemp) && echo \"tmp $f $MUSTER_WORK_DIR\"";
    trainer(2, 1).run(spark, ExternalCommand.of("/bin/sh", "-c", mktemp));
    List<String> made = texts("tmp ");
    assertEquals(2, made.size(), lines.toString());
    for (String line : made) {
      String[] file = line.split(" ");
      assertTrue(file[0].startsWith(file[1] + "/tmp/tmp."), line);
      assertFalse(Files.exists(Path.of(file[0])), "deleted with the task's directory: " + line);
    }

    lines.clear();
    trainer(1, 1).run(spark, ExternalCommand.of("/bin/sh", "-c", mktemp).withEnvironment(Map.of("TMPDIR",
        own.toString())));
    assertTrue(texts("tmp ").get(0).startsWith(own + "/tmp."), lines.toString());
  }

  @Test
  void emptyPartitionsGiveEmptyShardsAndARunWithoutDataGivesNone() {
    Optional<byte[]> result = trainer(4, 1).run(rows(2), shardCheck("check"));
    assertTrue(result.isPresent());
    List<String> counts = texts("shard rows ");
    assertEquals(4, counts.size(), lines.toString());
    assertEquals(2, counts.stream().mapToInt(Integer::parseInt).sum());
    assertTrue(counts.stream().filter("0"::equals).count() >= 2, counts.toString());

    lines.clear();
    trainer(3, 1).run(spark, shardCheck("check"));
    assertEquals(List.of("", "", ""), texts("no data"), lines.toString());
  }

  @Test
  void aFailingCommandFailsTheGangWithItsStderrTailAndEndsTheOtherCommands() throws Exception {
    IllegalStateException e = assertThrows(IllegalStateException.class,
        () -> trainer(4, 1).run(rows(20), shardCheck("fail-worker-1", dir.toString())));
    String message = e.getMessage();
    // worker 1's story, the driver's verdict, whichever task's failure Spark reports first
    assertTrue(message.matches("(?s)training failed on attempt 1 of 1: worker 1 on \\S+ \\(executor driver\\) "
        + "exited with code 3; the last 30 lines of its stderr:\n  boom line 11\n.*"), message);
    assertTrue(message.endsWith("\n  boom line 40") || message.contains("\n  boom line 40\n"), message);
    assertFalse(message.contains("\tat "), "no stack frames in the message: " + message);
    for (int i : new int[] {0, 2, 3}) {
      long pid = Pids.read(dir.resolve("pid-0-" + i), LIMIT);
      Eventually.within(LIMIT, "worker " + i + "'s command (pid " + pid + ") ended", () -> !Pids.running(pid));
    }
  }

  /**
   * A command that ignores SIGTERM, on a gang whose other command was SIGKILLed, is killed after the
   * failure grace period (2 s), not the 10 s grace of a polite end. The bound tells the two apart;
   * the target (gone within 3 s) is printed, not asserted: this is a shared 2-core machine.
   */
  @Test
  void aCommandIgnoringSigtermOnAFailedGangIsKilledAfterTheFailureGrace() throws Exception {
    String script = "trap '' TERM; echo $$ > \"" + dir + "/pid-$MUSTER_TASK_INDEX\"; while true; do sleep 0.1; done";
    Thread killer = new Thread(() -> {
      try {
        long survivor = Pids.read(dir.resolve("pid-0"), LIMIT);
        long victim = Pids.read(dir.resolve("pid-1"), LIMIT);
        Thread.sleep(500);
        long killed = System.nanoTime();
        ProcessHandle.of(victim).ifPresent(ProcessHandle::destroyForcibly); // SIGKILL
        Eventually.within(LIMIT, "worker 0's command (pid " + survivor + ") ended", () -> !Pids.running(survivor));
        Files.writeString(dir.resolve("took-ms"), Long.toString((System.nanoTime() - killed) / 1_000_000));
      } catch (Exception e) {
        throw new IllegalStateException(e);
      }
    });
    killer.start();
    IllegalStateException e = assertThrows(IllegalStateException.class,
        () -> trainer(2, 1).run(spark, ExternalCommand.of("sh", "-c", script)));
    killer.join(LIMIT.toMillis());
    assertTrue(e.getMessage().contains("worker 1"), e.getMessage());
    long took = Long.parseLong(Files.readString(dir.resolve("took-ms")));
    System.out.println("worker 0's command, ignoring SIGTERM, ended " + took + " ms after SIGKILL of worker 1's");
    assertTrue(took < 6_000, "worker 0's command ended " + took + " ms after the kill, as after a polite end's grace");
  }

  @Test
  void aCancelledJobLeavesNoCommandBehind() throws Exception {
    java.util.concurrent.atomic.AtomicReference<Throwable> notStarted = new java.util.concurrent.atomic.AtomicReference<>();
    Thread canceller = new Thread(() -> {
      try {
        for (int i = 0; i < 3; i++) {
          Pids.read(dir.resolve("pid-0-" + i), LIMIT);
        }
      } catch (Throwable e) { // Pids.read fails with an AssertionError: keep it for the test thread
        notStarted.set(e);
      } finally {
        spark.sparkContext().cancelAllJobs(); // always: else the sleeping commands hold the job for 10 minutes
      }
    });
    canceller.start();
    assertThrows(IllegalStateException.class, () -> trainer(3, 1).run(spark, shardCheck("sleep", dir.toString())));
    canceller.join();
    if (notStarted.get() != null) {
      throw new AssertionError("the job was cancelled before every command had started", notStarted.get());
    }
    for (int i = 0; i < 3; i++) {
      long pid = Pids.read(dir.resolve("pid-0-" + i), LIMIT);
      Eventually.within(LIMIT, "worker " + i + "'s command (pid " + pid + ") ended", () -> !Pids.running(pid));
    }
  }

  @Test
  void aFailedAttemptIsRunAgainWithTheAttemptNumber() throws Exception {
    Optional<byte[]> result = trainer(3, 2).run(rows(30), shardCheck("fail-once", dir.toString()));
    assertEquals("chief of attempt 1", new String(result.orElseThrow(), StandardCharsets.UTF_8));
    assertEquals(30, texts("shard rows ").stream().mapToInt(Integer::parseInt).sum(), "only attempt 1 read its data");
    assertTrue(lines.contains(new CommandLine("worker 1", Stream.STDERR, "boom line 40")));
    for (int i : new int[] {0, 2}) {
      long pid = Pids.read(dir.resolve("pid-0-" + i), LIMIT);
      assertFalse(Pids.running(pid), "attempt 0's worker " + i + " no longer runs");
    }
  }

  /**
   * The one failure rule, with the same command as {@code YarnJobsTest#theOneFailureRule} on YARN:
   * worker 1 fails the first attempt with {@code code}. A command's own exit code is the run's
   * verdict; 75 (asking for a re-run), or any code under {@link Rerun#ANY_FAILURE}, runs the whole
   * gang again, which then succeeds.
   */
  @ParameterizedTest(name = "exit {0} under {1}: re-run {2}")
  @CsvSource({"3, CLUSTER_FAILURES, false", "75, CLUSTER_FAILURES, true", "3, ANY_FAILURE, true"})
  void theOneFailureRule(int code, Rerun rerun, boolean reruns) throws Exception {
    String command = "echo \"$MUSTER_ATTEMPT\" >> " + dir + "/worker-$MUSTER_TASK_INDEX; "
        + "if [ \"$MUSTER_ATTEMPT\" = 0 ] && [ \"$MUSTER_TASK_INDEX\" = 1 ]; then "
        // fails once worker 0's command has run, or it may end the gang before worker 0's starts (10 s at most)
        + "for i in $(seq 100); do [ -s " + dir + "/worker-0 ] && break; sleep 0.1; done; "
        + "echo 'boom from worker 1' >&2; exit " + code + "; fi; "
        + "if [ \"$MUSTER_ATTEMPT\" = 0 ]; then exec sleep 600; fi; exit 0";
    BarrierTrainer trainer = BarrierTrainer.builder().numWorkers(2).maxAttempts(2).rerun(rerun)
        .commandLogs(lines::add).build();
    ExternalCommand sh = ExternalCommand.of("sh", "-c", command);
    if (reruns) {
      trainer.run(spark, sh);
      assertEquals("0\n1\n", Files.readString(dir.resolve("worker-0")), "worker 0 ran in both attempts");
      assertEquals("0\n1\n", Files.readString(dir.resolve("worker-1")));
    } else {
      IllegalStateException e = assertThrows(IllegalStateException.class, () -> trainer.run(spark, sh));
      assertTrue(e.getMessage().startsWith("training failed on attempt 1 of 2, not re-run ("
          + BarrierTrainer.COMMAND_NOT_RERUN + "): worker 1 on "), e.getMessage());
      assertTrue(e.getMessage().endsWith(" (executor driver) exited with code " + code + "; the last line of its "
          + "stderr:\n  boom from worker 1"), e.getMessage());
      assertEquals("0\n", Files.readString(dir.resolve("worker-0")), "one attempt only");
      assertEquals("0\n", Files.readString(dir.resolve("worker-1")));
    }
  }

  /**
   * A command's own failure that is the symptom of a cluster's failure heard a moment later (as
   * {@code YarnJobsTest} does on YARN): worker 0 exits 1 at once, worker 1 is killed by a signal a
   * second later. The kill is taken for the cause, and the gang runs again.
   */
  @Test
  void aClustersFailureHeardWithinTheCauseWindowIsTheVerdict() throws Exception {
    String command = "if [ \"$MUSTER_ATTEMPT\" = 0 ]; then "
        + "if [ \"$MUSTER_TASK_INDEX\" = 0 ]; then echo 'lost my peer' >&2; exit 1; fi; sleep 1; kill -9 $$; fi; "
        + "echo \"attempt $MUSTER_ATTEMPT\" > \"$MUSTER_RESULT_FILE\"";
    Optional<byte[]> result = trainer(2, 2).run(spark, ExternalCommand.of("sh", "-c", command));
    assertEquals("attempt 1\n", new String(result.orElseThrow(), StandardCharsets.UTF_8));
  }

  @Test
  void aCommandsOwnExitCodeFailsTheRunOnceAndACommandKilledByASignalIsReRun() throws Exception {
    IllegalStateException e = assertThrows(IllegalStateException.class,
        () -> trainer(4, 3).run(rows(20), shardCheck("fail-worker-1", dir.toString())));
    assertTrue(e.getMessage().startsWith("training failed on attempt 1 of 3, not re-run ("), e.getMessage());
    assertEquals(List.of("0"), lines.stream().map(CommandLine::text).filter(t -> t.startsWith("cuda [] attempt "))
        .map(t -> t.substring("cuda [] attempt ".length(), "cuda [] attempt ".length() + 1)).distinct().toList(),
        "attempt 0 only");

    lines.clear();
    String script = "if [ \"$MUSTER_ATTEMPT\" = 0 ] && [ \"$MUSTER_TASK_INDEX\" = 1 ]; then kill -9 $$; fi; "
        + "echo \"attempt $MUSTER_ATTEMPT\" > \"$MUSTER_RESULT_FILE\"";
    Optional<byte[]> result = trainer(2, 2).run(spark, ExternalCommand.of("sh", "-c", script));
    assertEquals("attempt 1\n", new String(result.orElseThrow(), StandardCharsets.UTF_8));
  }

  /**
   * A ParameterServerStrategy-shaped gang: the chief trains and exits; the workers and the ps serve
   * until they are ended. Each task writes its pid, says what it got, and (the chief) waits until
   * every task has started before it exits with {@code chiefExit}.
   */
  private Optional<byte[]> runPsGang(int chiefExit) {
    // the role line first: once every pid file is there the chief may exit, and the others are ended
    String script = "echo \"role $MUSTER_TASK_TYPE $MUSTER_TASK_INDEX chief=$MUSTER_IS_CHIEF workers=$MUSTER_NUM_WORKERS "
        + "shard=$(test -s \"${MUSTER_DATA_FILES:-/nonexistent}\" && basename \"$MUSTER_DATA_FILES\" || echo none)\"; "
        + "echo $$ > \"" + dir + "/pid-$MUSTER_TASK_TYPE-$MUSTER_TASK_INDEX\"; "
        + "if [ \"$MUSTER_TASK_TYPE\" = chief ]; then "
        + "  n=0; while [ $(ls \"" + dir + "\" | grep -c '^pid-') -lt 4 ] && [ $n -lt 300 ]; do sleep 0.1; n=$((n+1)); done; "
        + "  echo chief-result > \"$MUSTER_RESULT_FILE\"; exit " + chiefExit + "; "
        + "fi; exec sleep 600";
    return BarrierTrainer.builder().chief(true).numWorkers(2).ps(1).commandLogs(lines::add).build()
        .run(rows(30), ExternalCommand.of("sh", "-c", script).withTimeout(Duration.ofMinutes(2)));
  }

  private void assertEveryServedProcessIsGone() throws Exception {
    for (String task : List.of("chief-0", "worker-0", "worker-1", "ps-0")) {
      long pid = Pids.read(dir.resolve("pid-" + task), LIMIT);
      Eventually.within(LIMIT, task + "'s command (pid " + pid + ") has ended", () -> !Pids.running(pid));
    }
  }

  @Test
  void aPsGangSucceedsWhenTheChiefExitsZeroAndItsServingTasksAreEnded() throws Exception {
    Optional<byte[]> result = runPsGang(0);
    assertEquals("chief-result\n", new String(result.orElseThrow(), StandardCharsets.UTF_8));
    // the run returns only when every task has: the served workers and ps were ended, not waited for
    for (String task : List.of("chief-0", "worker-0", "worker-1", "ps-0")) {
      assertFalse(Pids.running(Pids.read(dir.resolve("pid-" + task), LIMIT)), task + " still runs");
    }
    assertEquals(List.of("chief 0 chief=true workers=3 shard=part-00000-of-00003.tfrecord",
        "ps 0 chief=false workers=3 shard=none",
        "worker 0 chief=false workers=3 shard=part-00001-of-00003.tfrecord",
        "worker 1 chief=false workers=3 shard=part-00002-of-00003.tfrecord"), texts("role ").stream().sorted().toList());
  }

  @Test
  void aPsGangFailsNamingTheChiefWhenTheChiefExitsNonZero() throws Exception {
    IllegalStateException failed = assertThrows(IllegalStateException.class, () -> runPsGang(1));
    assertTrue(failed.getMessage().matches("(?s)training failed on attempt 1 of 1: chief 0 on \\S+ \\(executor driver\\) "
        + "exited with code 1.*"), failed.getMessage());
    assertEveryServedProcessIsGone();
  }

  @Test
  void psAndEvaluatorNeedExternalCommandModeAndTheGangMustFitTheSlots() {
    IllegalArgumentException inJvm = assertThrows(IllegalArgumentException.class, () -> BarrierTrainer.builder()
        .numWorkers(2).ps(1).build().fit(spark.sparkContext().emptyRDD(scala.reflect.ClassTag$.MODULE$.apply(
            Integer.class)).toJavaRDD(), ctx -> "never"));
    assertTrue(inJvm.getMessage().startsWith("fit runs MultiWorkerMirroredStrategy, which has no ps or evaluator "
        + "tasks, but the gang is 2 workers, 1 ps"), inJvm.getMessage());
    IllegalStateException tooBig = assertThrows(IllegalStateException.class, () -> BarrierTrainer.builder()
        .chief(true).numWorkers(2).ps(1).evaluator(true).build().run(spark, ExternalCommand.of("true")));
    assertTrue(tooBig.getMessage().startsWith("the gang's 5 tasks exceed the 4 task slots"), tooBig.getMessage());
  }

  @Test
  void theEnvironmentNamesTheTaskItsGpusAndItsFiles() {
    Gang gang = GangSpec.workers(2).formed(List.of(HostPort.parse("h:1"), HostPort.parse("h:2")));
    Map<String, String> env = TaskEnvironment.of(gang, 1, 2, Gpus.visibleDevices(List.of("2", "0"), "4,5,6,7"),
        Path.of("/w"), Optional.of("hdfs://nn/out"), JobToken.of("secret"));
    assertEquals("{\"cluster\": {\"worker\": [\"h:1\", \"h:2\"]}, \"task\": {\"type\": \"worker\", \"index\": 1}}",
        env.get("TF_CONFIG"));
    assertEquals("6,4", env.get("CUDA_VISIBLE_DEVICES"));
    assertEquals(Map.of("MUSTER_TASK_TYPE", "worker", "MUSTER_TASK_INDEX", "1", "MUSTER_NUM_WORKERS", "2",
        "MUSTER_IS_CHIEF", "false", "MUSTER_ATTEMPT", "2", "MUSTER_WORK_DIR", "/w", "MUSTER_RESULT_FILE", "/w/result",
        "MUSTER_OUTPUT_DIR", "hdfs://nn/out", "MUSTER_JOB_TOKEN", "secret"),
        env.entrySet().stream().filter(en -> en.getKey().startsWith("MUSTER_"))
            .collect(Collectors.toMap(Map.Entry::getKey, Map.Entry::getValue)));
    assertEquals("", TaskEnvironment.of(gang, 0, 0, List.of(), Path.of("/w"), Optional.empty(), JobToken.of("s"))
        .get("CUDA_VISIBLE_DEVICES"),
        "a task without GPUs sees none, not every GPU of the machine");
    IllegalArgumentException reserved = assertThrows(IllegalArgumentException.class,
        () -> ExternalCommand.of("x").withEnvironment(Map.of("TF_CONFIG", "{}")));
    assertEquals("the environment variable TF_CONFIG is set by Muster for each task; leave it out of withEnvironment",
        reserved.getMessage());
    IllegalArgumentException map = assertThrows(IllegalArgumentException.class, () -> trainer(2, 1).run(
        spark.sql("select map('a', 1) as m"), ExternalCommand.of("x")));
    assertEquals("column 'm' has type map<string,int>, which has no tf.train.Feature; select it away or flatten it "
        + "into numeric, string, binary or array columns before training", map.getMessage());
  }
}
