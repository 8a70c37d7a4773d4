package io.muster.examples;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.muster.checkpoint.BackupAndRestore;
import io.muster.checkpoint.BundleReader;
import io.muster.checkpoint.CheckpointManager;
import io.muster.checkpoint.Tensor;
import io.muster.checkpoint.WritePolicy;
import io.muster.summary.EventFiles;
import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.lang.management.ManagementFactory;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.nio.file.Files;
import java.nio.file.Path;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FileSystem;
import org.apache.spark.sql.SparkSession;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** The main job on real data: scikit-learn's digits (UCI), 4 Spark barrier workers against 1. */
class SparkDemoTest {

  private static final Path DIGITS = Path.of(System.getProperty("user.dir")).toAbsolutePath().getParent()
      .getParent().resolve("shared").resolve("data").resolve("digits.csv");
  private static SparkSession spark;

  @BeforeAll
  static void start() {
    spark = SparkSession.builder().master("local[4]").appName("muster-demo-test").config("spark.ui.enabled", "false")
        .config("spark.driver.host", "127.0.0.1").config("spark.driver.bindAddress", "127.0.0.1").getOrCreate();
  }

  @AfterAll
  static void stop() {
    if (spark != null) {
      spark.stop();
    }
  }

  @Test
  void fourWorkersReachTheAccuracyOfOneOnDigits(@TempDir Path tmp) throws Exception {
    assumeTrue(Files.exists(DIGITS), "../shared/data/digits.csv is not here (a user's clone has no shared/): skipped");
    SparkDemo.Result one = SparkDemo.run(spark, SparkDemo.Options.parse("--data", DIGITS.toString(), "--out",
        tmp.resolve("one").toString(), "--workers", "1", "--epochs", "15"));
    SparkDemo.Result four = SparkDemo.run(spark, SparkDemo.Options.parse("--data", DIGITS.toString(), "--out",
        tmp.resolve("four").toString(), "--workers", "4", "--epochs", "15"));
    assertTrue(one.accuracy() >= 0.93, "one worker: " + one.accuracy());
    assertTrue(four.accuracy() >= 0.93, "four workers: " + four.accuracy());
    assertTrue(Math.abs(four.accuracy() - one.accuracy()) <= 0.03, four.accuracy() + " vs " + one.accuracy());

    FileSystem fs = FileSystem.getLocal(new Configuration()).getRawFileSystem();
    org.apache.hadoop.fs.Path ckpt = new org.apache.hadoop.fs.Path(four.checkpoint());
    assertEquals(new org.apache.hadoop.fs.Path(ckpt, "ckpt-15"), CheckpointManager.latestCheckpoint(fs, ckpt).orElseThrow());
    assertFalse(Files.list(tmp.resolve("four").resolve("ckpt")).anyMatch(p -> p.getFileName().toString().startsWith("workertemp")),
        "only the chief's files remain");
    assertTrue(Files.list(tmp.resolve("four").resolve("logs").resolve("train"))
        .anyMatch(p -> p.getFileName().toString().startsWith("events.out.tfevents.")), "TensorBoard events");
    assertFalse(Files.exists(tmp.resolve("four").resolve("backup").resolve("chief")), "the backup is gone after success");
  }

  @Test
  void aGangThatCrashesResumesFromItsBackupAndEndsWithTheModelOfAnUninterruptedRun(@TempDir Path tmp)
      throws Exception {
    SparkDemo.Result straight = SparkDemo.run(spark, SparkDemo.Options.parse("--out", tmp.resolve("straight").toString(),
        "--workers", "3", "--epochs", "4", "--global-batch", "60"));
    SparkDemo.Result crashed = SparkDemo.run(spark, SparkDemo.Options.parse("--out", tmp.resolve("crashed").toString(),
        "--workers", "3", "--epochs", "4", "--global-batch", "60", "--crash-once-at-epoch", "3"));
    assertEquals(1, straight.attempts());
    assertEquals(2, crashed.attempts(), "worker 1 crashed in epoch 3 of the first run; the gang ran again");
    assertEquals(2, crashed.resumedAtEpoch(), "the second run started at epoch 3 (0-based 2), after the backup");

    FileSystem fs = FileSystem.getLocal(new Configuration()).getRawFileSystem();
    Map<String, Tensor> want = latest(fs, straight.checkpoint());
    Map<String, Tensor> got = latest(fs, crashed.checkpoint());
    assertEquals(want.keySet(), got.keySet());
    assertEquals(4, got.get("epoch").longs()[0], "the latest checkpoint is the last epoch's");
    for (String name : List.of("weights", "bias")) {
      float[] a = want.get(name).floats();
      float[] b = got.get(name).floats();
      for (int i = 0; i < a.length; i++) {
        assertEquals(a[i], b[i], 1e-5f, name + "[" + i + "]");
      }
    }
    // epochs 1 and 2 were not trained again: each epoch's loss was written once, by one run or the other
    List<Long> steps = new ArrayList<>();
    try (var files = Files.list(tmp.resolve("crashed").resolve("logs").resolve("train"))) {
      for (Path file : files.filter(p -> p.getFileName().toString().startsWith("events.out.tfevents.")).toList()) {
        EventFiles.scalars(fs, new org.apache.hadoop.fs.Path(file.toUri())).stream()
            .filter(sc -> sc.tag().equals("epoch_loss")).forEach(sc -> steps.add(sc.step()));
      }
    }
    assertEquals(List.of(1L, 2L, 3L, 4L), steps.stream().sorted().toList());
  }

  /**
   * Spark decommissions the executor (SIGPWR to this JVM, local mode's executor) mid-run: the gang
   * saves after a step every worker agrees on, runs again from that step, and ends with the model of
   * an uninterrupted run.
   */
  @Test
  void aDecommissionedGangSavesMidEpochResumesThereAndEndsWithTheUninterruptedModel(@TempDir Path tmp)
      throws Exception {
    String[] run = {"--workers", "3", "--epochs", "40", "--global-batch", "60"};
    SparkDemo.Result straight = SparkDemo.run(spark, SparkDemo.Options.parse(with(run, "--out", tmp.resolve("a"))));
    var preempted = java.util.concurrent.CompletableFuture.supplyAsync(() -> SparkDemo.run(spark,
        SparkDemo.Options.parse(with(run, "--out", tmp.resolve("b")))));
    io.muster.testing.Eventually.within(java.time.Duration.ofMinutes(1), "the second epoch's checkpoint",
        () -> preempted.isDone() || Files.exists(tmp.resolve("b").resolve("ckpt").resolve("ckpt-2.index")));
    // With no task listening, SIGPWR's default would end this JVM: signal only a run still going.
    assertFalse(preempted.isDone(), "the run ended before its second epoch's checkpoint was seen: " + preempted);
    assertEquals(0, new ProcessBuilder("kill", "-PWR", Long.toString(ProcessHandle.current().pid())).start().waitFor());
    SparkDemo.Result resumed = preempted.get(5, java.util.concurrent.TimeUnit.MINUTES);
    assertEquals(2, resumed.attempts(), "the gang saved and ran again");
    assertTrue(resumed.resumedAtEpoch() >= 2 && resumed.resumedAtEpoch() < 40, "resumed after epoch 2: "
        + resumed.resumedAtEpoch());
    FileSystem fs = FileSystem.getLocal(new Configuration()).getRawFileSystem();
    Map<String, Tensor> want = latest(fs, straight.checkpoint());
    Map<String, Tensor> got = latest(fs, resumed.checkpoint());
    for (String name : List.of("weights", "bias")) {
      float[] a = want.get(name).floats();
      float[] b = got.get(name).floats();
      for (int i = 0; i < a.length; i++) {
        assertEquals(a[i], b[i], 1e-5f, name + "[" + i + "]");
      }
    }
  }

  private static String[] with(String[] args, String option, Path value) {
    String[] all = java.util.Arrays.copyOf(args, args.length + 2);
    all[args.length] = option;
    all[args.length + 1] = value.toString();
    return all;
  }

  /**
   * A run SIGKILLed wherever it is (in an epoch, in its checkpoint's save, between that and its
   * backup), then resumed: its checkpoints are numbered by their epochs, only the newest five are
   * left (no file of a killed save), and TensorBoard has every epoch's loss.
   */
  @Test
  void aKilledRunResumedLeavesTheCheckpointsAndSummariesOfAnUninterruptedRun(@TempDir Path tmp) throws Exception {
    Path out = tmp.resolve("m");
    String[] run = {"--out", out.toString(), "--workers", "2", "--epochs", "100000", "--global-batch", "40"};
    killAtTheFourthCheckpoint(tmp, run);
    FileSystem fs = FileSystem.getLocal(new Configuration()).getRawFileSystem();
    org.apache.hadoop.fs.Path ckpt = new org.apache.hadoop.fs.Path("file:" + out.resolve("ckpt").toAbsolutePath());
    long killedAt = latest(fs, ckpt.toString()).get("epoch").longs()[0];
    int epochs = (int) killedAt + 3;
    run[5] = String.valueOf(epochs);
    ByteArrayOutputStream stderr = new ByteArrayOutputStream();
    assertEquals(0, SparkDemo.run(run, new PrintStream(new ByteArrayOutputStream(), true),
        new PrintStream(stderr, true), options -> spark), stderr::toString);

    // the state file, and the chief's claim on the directory for its attempt (a stale chief is refused)
    List<String> want = new ArrayList<>(List.of(".muster-writer", "checkpoint"));
    for (int n = epochs - 4; n <= epochs; n++) {
      want.addAll(List.of("ckpt-" + n + ".data-00000-of-00001", "ckpt-" + n + ".index"));
      Map<String, Tensor> model = BundleReader.open(fs, new org.apache.hadoop.fs.Path(ckpt, "ckpt-" + n)).readAll();
      assertEquals(n, model.get("epoch").longs()[0], "ckpt-" + n + " holds epoch " + n);
    }
    try (var files = Files.list(out.resolve("ckpt"))) {
      assertEquals(want.stream().sorted().toList(), files.map(p -> p.getFileName().toString()).sorted().toList());
    }
    java.util.Set<Long> logged = new java.util.TreeSet<>();
    try (var files = Files.list(out.resolve("logs").resolve("train"))) {
      for (Path file : files.toList()) {
        EventFiles.scalars(fs, new org.apache.hadoop.fs.Path(file.toUri())).stream()
            .filter(sc -> sc.tag().equals("epoch_loss")).forEach(sc -> logged.add(sc.step()));
      }
    }
    assertEquals(java.util.stream.LongStream.rangeClosed(1, epochs).boxed().toList(), List.copyOf(logged),
        "every epoch's loss is on disk, the killed run's included (it was killed after epoch " + killedAt + ")");
  }

  /**
   * The reproduction: a run on 64 features, SIGKILLed after a few epochs (its backup left
   * behind), then a run on the generated data (20 features) into the same --out.
   */
  @Test
  void aRunOnOtherDataRefusesTheStaleBackupOfAKilledRunInsteadOfResumingIt(@TempDir Path tmp) throws Exception {
    Path csv = csv(tmp.resolve("digits64.csv"), 64, 10, 200);
    Path out = tmp.resolve("m");
    killAtTheFourthCheckpoint(tmp, "--data", csv.toString(), "--out", out.toString(), "--workers", "2", "--epochs",
        "100000", "--global-batch", "20");
    assertTrue(Files.exists(out.resolve("backup").resolve("chief").resolve("checkpoint")), "the killed run's backup");

    ByteArrayOutputStream stdout = new ByteArrayOutputStream();
    ByteArrayOutputStream stderr = new ByteArrayOutputStream();
    int code = SparkDemo.run(new String[] {"--out", out.toString(), "--workers", "2", "--epochs", "10"},
        new PrintStream(stdout, true), new PrintStream(stderr, true), options -> spark);
    assertEquals(1, code);
    assertEquals("", stdout.toString(), "no accuracy is printed");
    String data = "file:" + csv.toAbsolutePath() + " (" + Files.size(csv) + " bytes, modified "
        + Instant.ofEpochMilli(Files.getLastModifiedTime(csv).toMillis()) + ")";
    assertEquals("muster demo: --out file:" + out.toAbsolutePath() + " holds the outputs of another run: data " + data
        + " there, generated (4000 rows of 20 features and 10 classes) here; 64 features there, 20 here; give --out"
        + " a new directory, or --overwrite to replace them\n", stderr.toString());

    stderr.reset();
    assertEquals(0, SparkDemo.run(new String[] {"--out", out.toString(), "--workers", "2", "--epochs", "2",
        "--overwrite"}, new PrintStream(stdout, true), new PrintStream(stderr, true), options -> spark), stderr::toString);
    assertTrue(stdout.toString().startsWith("held-out accuracy "), stdout.toString());
    FileSystem fs = FileSystem.getLocal(new Configuration()).getRawFileSystem();
    Map<String, Tensor> model = latest(fs, "file:" + out.resolve("ckpt").toAbsolutePath());
    assertEquals("float32[20, 10]", model.get("weights").toString(), "the new run's model, trained from scratch");
    assertEquals(2, model.get("epoch").longs()[0], "its numbering starts again at 1: ckpt-2 is its second epoch");
  }

  @Test
  void theSameRunResumesOnlyFromABackupWithinItsEpochs(@TempDir Path tmp) throws Exception {
    Path out = tmp.resolve("m");
    Files.createDirectories(out.resolve("ckpt"));
    String[] twoEpochs = {"--out", out.toString(), "--workers", "2", "--epochs", "2"};
    ByteArrayOutputStream stderr = new ByteArrayOutputStream();
    PrintStream err = new PrintStream(stderr, true);
    PrintStream out1 = new PrintStream(new ByteArrayOutputStream(), true);
    assertEquals(1, SparkDemo.run(twoEpochs, out1, err, options -> spark));
    assertEquals("muster demo: --out file:" + out.toAbsolutePath() + " holds outputs (ckpt) that do not say which run"
        + " they belong to; give --out a new directory, or --overwrite to replace them\n", stderr.toString());
    Files.delete(out.resolve("ckpt"));

    assertEquals(0, SparkDemo.run(twoEpochs, out1, err, options -> spark));
    stderr.reset();
    assertEquals(1, SparkDemo.run(twoEpochs, out1, err, options -> spark), "a finished run is not trained again");
    assertEquals("muster demo: --out file:" + out.toAbsolutePath() + " holds a finished run of this job (its latest"
        + " checkpoint ckpt-2, and no backup left to resume from); give --out a new directory, or --overwrite to replace"
        + " them\n",
        stderr.toString());

    // a backup of epoch 12 of this run, as a longer run killed there leaves it
    FileSystem fs = FileSystem.getLocal(new Configuration()).getRawFileSystem();
    org.apache.hadoop.fs.Path backupDir = new org.apache.hadoop.fs.Path("file:" + out.resolve("backup").toAbsolutePath());
    try (BackupAndRestore backup = new BackupAndRestore(fs, backupDir, WritePolicy.SINGLE_WORKER,
        BackupAndRestore.EVERY_EPOCH)) {
      backup.onEpochEnd(11, () -> SoftmaxModel.variablesLike(20, 10));
    }
    stderr.reset();
    assertEquals(1, SparkDemo.run(new String[] {"--out", out.toString(), "--workers", "2", "--epochs", "10"}, out1,
        err, options -> spark));
    assertEquals("muster demo: " + backupDir + "/chief/ckpt-1 was backed up in epoch 12, past this run's 10 epochs;"
        + " give more --epochs to continue that run, --out a new directory, or --overwrite to replace it\n",
        stderr.toString());
    stderr.reset();
    assertEquals(0, SparkDemo.run(new String[] {"--out", out.toString(), "--workers", "2", "--epochs", "13"}, out1,
        err, options -> spark), stderr::toString);
    assertEquals(13, latest(fs, "file:" + out.resolve("ckpt").toAbsolutePath()).get("epoch").longs()[0],
        "the same run resumed at epoch 13 and trained it alone");
  }

  /** A CSV of {@code rows} rows: {@code features} numeric columns p0.. and an integer label in [0, classes). */
  static Path csv(Path file, int features, int classes, int rows) throws Exception {
    java.util.Random random = new java.util.Random(1);
    StringBuilder text = new StringBuilder();
    for (int f = 0; f < features; f++) {
      text.append("p").append(f).append(',');
    }
    text.append("label\n");
    for (int r = 0; r < rows; r++) {
      int label = r % classes;
      for (int f = 0; f < features; f++) {
        text.append(String.format("%.3f", random.nextGaussian() + (f % classes == label ? 2 : 0))).append(',');
      }
      text.append(label).append('\n');
    }
    return Files.writeString(file, text);
  }

  /** Runs the demo with {@code args} in a JVM of its own and SIGKILLs it once its 4th checkpoint is there. */
  private static void killAtTheFourthCheckpoint(Path tmp, String... args) throws Exception {
    Path out = Path.of(args[List.of(args).indexOf("--out") + 1]);
    // its temporary files in the test's directory: a killed JVM runs no shutdown hook, and what
    // Spark would have deleted (spark-*, blockmgr-*, artifacts-*, lz4's library) would stay in /tmp
    Path sparkTmp = Files.createDirectories(tmp.resolve("spark-tmp"));
    List<String> command = new ArrayList<>(List.of(Path.of(System.getProperty("java.home"), "bin", "java").toString(),
        "-Xmx1g", "-Djava.io.tmpdir=" + sparkTmp));
    ManagementFactory.getRuntimeMXBean().getInputArguments().stream()
        .filter(a -> a.startsWith("--add-opens") || a.startsWith("-Djdk.") || a.startsWith("-Dio.netty"))
        .forEach(command::add);
    command.addAll(List.of("-cp", System.getProperty("java.class.path"), SparkDemo.class.getName()));
    command.addAll(List.of(args));
    Path log = tmp.resolve("killed-run.log");
    ProcessBuilder builder = new ProcessBuilder(command).redirectErrorStream(true).redirectOutput(log.toFile());
    builder.environment().put("SPARK_LOCAL_IP", "127.0.0.1");
    Process run = builder.start();
    try {
      long deadline = System.nanoTime() + 120_000_000_000L;
      while (!Files.exists(out.resolve("ckpt").resolve("ckpt-4.index"))) {
        assertTrue(run.isAlive(), () -> "the run ended: " + readLog(log));
        assertTrue(System.nanoTime() < deadline, "no 4th checkpoint in 120 s");
        Thread.sleep(20);
      }
    } finally {
      // its children first: a JVM killed while it starts one (Hadoop's Shell, for a file's
      // permissions) leaves the JDK's jspawnhelper waiting on a pipe, for ever
      List<ProcessHandle> children = run.descendants().toList();
      run.destroyForcibly().waitFor();
      children.forEach(ProcessHandle::destroyForcibly);
    }
  }

  private static String readLog(Path file) {
    try {
      return Files.readString(file);
    } catch (java.io.IOException e) {
      return e.toString();
    }
  }

  private static Map<String, Tensor> latest(FileSystem fs, String dir) throws Exception {
    org.apache.hadoop.fs.Path ckpt = new org.apache.hadoop.fs.Path(dir);
    return BundleReader.open(fs, CheckpointManager.latestCheckpoint(fs, ckpt).orElseThrow()).readAll();
  }
}
