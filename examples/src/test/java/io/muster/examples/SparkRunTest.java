package io.muster.examples;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import io.muster.internal.Json;
import io.muster.spark.BarrierTrainer;
import io.muster.spark.CommandLine;
import io.muster.spark.ExternalCommand;
import io.muster.testing.ChildJvm;
import io.muster.testing.Eventually;
import io.muster.testing.Pids;
import io.muster.testing.PythonTensorFlow;
import java.lang.management.ManagementFactory;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CopyOnWriteArrayList;
import org.apache.spark.sql.SparkSession;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** {@code muster spark-run}: a shell command as the training command, on a CSV's shards, in Spark local[3]. */
class SparkRunTest {

  private static SparkSession spark;

  @BeforeAll
  static void start() {
    spark = SparkSession.builder().master("local[3]").appName("muster-spark-run-test").config("spark.ui.enabled", "false")
        .config("spark.driver.host", "127.0.0.1").config("spark.driver.bindAddress", "127.0.0.1").getOrCreate();
  }

  @AfterAll
  static void stop() {
    spark.stop();
  }

  /**
   * Real TensorFlow 2.21: a ParameterServerStrategy job (chief, worker, ps) on a Spark gang. The
   * chief's coordinator runs 50 closures on the worker against the variable on the ps and exits;
   * the worker's and the ps's servers never exit by themselves, and Muster ends them.
   */
  @Test
  void realTensorFlowParameterServerStrategyEndsWithItsChiefAndItsServersAreEnded(@TempDir Path tmp)
      throws Exception {
    Path python = PythonTensorFlow.python();
    Path script = PythonTensorFlow.script("ps_strategy.py", tmp);
    List<CommandLine> lines = new CopyOnWriteArrayList<>();
    byte[] result = BarrierTrainer.builder().chief(true).numWorkers(1).ps(1).commandLogs(lines::add).build()
        .run(spark, ExternalCommand.of(python.toString(), script.toString()).withTimeout(Duration.ofMinutes(3)))
        .orElseThrow();
    assertEquals("total=50", new String(result, StandardCharsets.UTF_8));
    List<String> started = lines.stream().map(CommandLine::text).filter(t -> t.startsWith("started ")).sorted()
        .toList();
    assertEquals(3, started.size(), "chief, worker and ps each started once: " + started);
    for (String line : started) {
      long pid = Long.parseLong(line.substring(line.lastIndexOf(' ') + 1));
      assertTrue(!Pids.running(pid), line + ": the process still runs");
    }
  }

  @Test
  void theChiefsResultComesBackAfterEveryWorkerReadItsShard(@TempDir Path tmp) throws Exception {
    Path csv = tmp.resolve("rows.csv");
    StringBuilder rows = new StringBuilder("x,label\n");
    for (int i = 0; i < 30; i++) {
      rows.append(i * 0.5).append(',').append(i % 2).append('\n');
    }
    Files.writeString(csv, rows);
    // every worker checks its shard and its output directory; the chief writes what it saw
    String script = "test -s \"$MUSTER_SCHEMA_FILE\" && test -f \"$MUSTER_DATA_FILES\" || exit 4; "
        + "[ \"$MUSTER_OUTPUT_DIR\" = \"" + tmp.resolve("out") + "\" ] || exit 5; "
        + "if [ \"$MUSTER_IS_CHIEF\" = true ]; then printf '%s of %s' \"$MUSTER_TASK_INDEX\" \"$MUSTER_NUM_WORKERS\" "
        + "> \"$MUSTER_RESULT_FILE\"; fi";
    byte[] result = SparkRun.run(spark, SparkRun.options("--workers", "3", "--data", csv.toString(), "--out",
        tmp.resolve("out").toString()), List.of("sh", "-c", script)).orElseThrow();
    assertEquals("0 of 3", new String(result, StandardCharsets.UTF_8));

    IllegalStateException failed = assertThrows(IllegalStateException.class, () -> SparkRun.run(spark,
        SparkRun.options("--workers", "2"), List.of("sh", "-c", "echo no data here >&2; exit 4")));
    assertTrue(failed.getMessage().contains("exited with code 4; the last line of its stderr:\n  no data here"),
        failed.getMessage());
  }

  /** A local --out reaches the command as a plain path: a shell's redirect and Python's open write into it. */
  @Test
  void aLocalOutReachesTheCommandAsAPathThatAShellAndPythonWriteTo(@TempDir Path tmp) throws Exception {
    assumeTrue(python3(), "python3 is not on the PATH");
    Path out = tmp.resolve("out");
    String writes = "echo sh > \"$MUSTER_OUTPUT_DIR/sh-$MUSTER_TASK_INDEX\" && python3 -c 'import os; "
        + "open(os.path.join(os.environ[\"MUSTER_OUTPUT_DIR\"], \"py-\" + os.environ[\"MUSTER_TASK_INDEX\"]), \"w\")"
        + ".write(\"py\")'";
    Outcome run = sparkRun("--workers", "2", "--out", out.toString(), "--", "sh", "-c", writes);
    assertEquals(0, run.code(), run.err());
    for (int task = 0; task < 2; task++) {
      assertEquals("sh\n", Files.readString(out.resolve("sh-" + task)));
      assertEquals("py", Files.readString(out.resolve("py-" + task)));
    }
  }

  private static boolean python3() {
    try {
      Process version = new ProcessBuilder("python3", "--version").redirectErrorStream(true).start();
      if (!version.waitFor(30, java.util.concurrent.TimeUnit.SECONDS)) {
        version.destroyForcibly();
        return false;
      }
      return version.exitValue() == 0;
    } catch (java.io.IOException | InterruptedException e) {
      return false;
    }
  }

  /**
   * The reproduction: the {@code spark-run} JVM is killed (SIGKILL) while its commands run;
   * the guards end the commands and delete the tasks' work directories, so no shard of the training
   * data is left under Spark's temporary directories.
   */
  @Test
  void killingTheSparkRunJvmLeavesNoShardBehind(@TempDir Path tmp) throws Exception {
    Path csv = tmp.resolve("rows.csv");
    StringBuilder rows = new StringBuilder("x,label\n");
    for (int i = 0; i < 30; i++) {
      rows.append(i * 0.5).append(',').append(i % 2).append('\n');
    }
    Files.writeString(csv, rows);
    Path sparkTmp = Files.createDirectories(tmp.resolve("spark-tmp"));
    List<String> command = new ArrayList<>(List.of(Path.of(System.getProperty("java.home"), "bin", "java").toString(),
        "-Xmx512m", "-Djava.io.tmpdir=" + sparkTmp));
    ManagementFactory.getRuntimeMXBean().getInputArguments().stream()
        .filter(a -> a.startsWith("--add-opens") || a.startsWith("-Djdk.") || a.startsWith("-Dio.netty"))
        .forEach(command::add);
    command.addAll(List.of("-cp", System.getProperty("java.class.path"), SparkRun.class.getName(), "--workers", "2",
        "--data", csv.toString(), "--", "sh", "-c",
        "test -s \"$MUSTER_DATA_FILES\" && echo $$ > \"" + tmp + "/pid-$MUSTER_TASK_INDEX\"; exec sleep 600"));
    ProcessBuilder builder = new ProcessBuilder(command).redirectErrorStream(true)
        .redirectOutput(tmp.resolve("spark-run.log").toFile());
    builder.environment().put("SPARK_LOCAL_IP", "127.0.0.1");
    Process run = builder.start();
    try {
      long[] pids = new long[2];
      for (int i = 0; i < 2; i++) {
        pids[i] = Pids.read(tmp.resolve("pid-" + i), Duration.ofSeconds(120));
      }
      assertEquals(2, shards(sparkTmp).size(), "both shards are on disk while the commands run");
      run.destroyForcibly().waitFor();
      for (long pid : pids) {
        Eventually.within(Duration.ofSeconds(30), "the command (pid " + pid + ") of the killed JVM ended",
            () -> !Pids.running(pid));
      }
      Eventually.within(Duration.ofSeconds(30), "no shard left under " + sparkTmp, () -> shards(sparkTmp).isEmpty());
    } finally {
      run.destroyForcibly().waitFor();
    }
  }

  private static List<Path> shards(Path dir) {
    try (var files = Files.walk(dir)) {
      return files.filter(p -> p.getFileName().toString().endsWith(".tfrecord")).toList();
    } catch (java.io.IOException | java.io.UncheckedIOException e) {
      return List.of(dir.resolve("(still changing: " + e + ")"));
    }
  }

  /**
   * Muster's own runtime as the command: each worker JVM binds the port its task reserved and
   * released, joins with the run's token, and trains; all end with the same weights.
   */
  @Test
  void musterWorkerJvmsAsTheCommandJoinOnTheReservedPortsAndAgree() {
    List<CommandLine> lines = new CopyOnWriteArrayList<>();
    List<String> command = ChildJvm.command("256m", SoftmaxRegression.class,
        List.of("--epochs", "2", "--global-batch", "240"));
    BarrierTrainer.builder().numWorkers(3).commandLogs(lines::add).build().run(spark, ExternalCommand.of(command));
    List<Map<String, Object>> results = new ArrayList<>();
    for (CommandLine line : lines) {
      if (line.text().startsWith("{\"task\"")) {
        @SuppressWarnings("unchecked")
        Map<String, Object> result = (Map<String, Object>) Json.parse(line.text());
        assertEquals(line.task(), result.get("task"), "each worker reports under its own prefix");
        results.add(result);
      }
    }
    assertEquals(3, results.size(), lines.toString());
    assertEquals(1, results.stream().map(r -> r.get("weights_sha256")).distinct().count(), results.toString());
    assertTrue(((Number) results.get(0).get("accuracy")).doubleValue() > 0.7, results.toString());
  }

  private record Outcome(int code, String out, String err) {}

  private static Outcome sparkRun(String... args) {
    java.io.ByteArrayOutputStream out = new java.io.ByteArrayOutputStream();
    java.io.ByteArrayOutputStream err = new java.io.ByteArrayOutputStream();
    int code = SparkRun.run(args, new java.io.PrintStream(out, true), new java.io.PrintStream(err, true),
        trainer -> spark);
    return new Outcome(code, out.toString(StandardCharsets.UTF_8), err.toString(StandardCharsets.UTF_8));
  }

  /**
   * A second run into the same --out: the same command resumes with its outputs, another command is
   * refused in one line (exit 1, before it runs) unless --overwrite, which empties the directory; a
   * directory holding files no run of Muster's wrote is refused, even with --overwrite.
   */
  @Test
  void aSecondRunIntoTheSameOutResumesTheSameRunAndRefusesAnother(@TempDir Path tmp) throws Exception {
    Path out = tmp.resolve("out");
    // the chief appends a line to runs.txt in its output directory each time it runs
    String appends = "if [ \"$MUSTER_IS_CHIEF\" = true ]; then echo run >> \"$MUSTER_OUTPUT_DIR/runs.txt\"; fi";
    Outcome first = sparkRun("--workers", "1", "--out", out.toString(), "--", "sh", "-c", appends);
    assertEquals(0, first.code(), first.err());
    Outcome again = sparkRun("--workers", "2", "--out", out.toString(), "--", "sh", "-c", appends);
    assertEquals(0, again.code(), again.err());
    assertEquals(List.of("run", "run"), Files.readAllLines(out.resolve("runs.txt")), "the same run found its outputs");

    String other = "touch \"$MUSTER_OUTPUT_DIR/other-ran\"";
    Outcome refused = sparkRun("--workers", "1", "--out", out.toString(), "--", "sh", "-c", other);
    assertEquals(1, refused.code(), refused.err());
    assertEquals("muster spark-run: --out file:" + out + " holds the outputs of "
        + "another run: command sh -c '" + appends + "' there, sh -c '" + other + "' here; give --out a new "
        + "directory, or --overwrite to replace them\n", refused.err());
    assertTrue(!Files.exists(out.resolve("other-ran")), "the other command never ran");

    Outcome overwritten = sparkRun("--workers", "1", "--out", out.toString(), "--overwrite", "--", "sh", "-c", other);
    assertEquals(0, overwritten.code(), overwritten.err());
    assertTrue(Files.exists(out.resolve("other-ran")));
    assertTrue(!Files.exists(out.resolve("runs.txt")), "the other run's outputs were deleted");

    Path stranger = Files.createDirectories(tmp.resolve("stranger"));
    Files.writeString(stranger.resolve("notes.txt"), "mine");
    Outcome notOurs = sparkRun("--workers", "1", "--out", stranger.toString(), "--overwrite", "--", "true");
    assertEquals(1, notOurs.code(), notOurs.err());
    assertEquals("muster spark-run: --out file:" + stranger + " holds files that "
        + "do not say which run they belong to (notes.txt); give --out a new directory (Muster replaces only a "
        + "directory its own runs wrote)\n", notOurs.err());
    assertEquals("mine", Files.readString(stranger.resolve("notes.txt")));
  }

  /**
   * This JVM, Spark's local executor, gets Spark's decommission signal (SIGPWR) while the commands
   * run: both get --preemption-signal; worker 0 exits with --preemption-exit-code (saved), worker 1
   * with another code (it did not save), and the gang runs again without counting the attempt (one
   * allowed).
   */
  @Test
  void aDecommissionNoticeReachesEveryCommandAsItsPreemptionSignalAndTheRerunIsNotCounted(@TempDir Path tmp)
      throws Exception {
    String marks = tmp.toString();
    String script = "if [ \"$MUSTER_ATTEMPT\" = 1 ]; then touch " + marks + "/resumed-$MUSTER_TASK_INDEX; exit 0; fi; "
        + "trap 'touch " + marks + "/signalled-$MUSTER_TASK_INDEX; exit $((7 - 4 * MUSTER_TASK_INDEX))' USR1; "
        + "touch " + marks + "/ready-$MUSTER_TASK_INDEX; while :; do sleep 0.1; done";
    var run = java.util.concurrent.CompletableFuture.supplyAsync(() -> SparkRun.run(spark, SparkRun.options("--workers",
        "2", "--max-attempts", "1", "--preemption-signal", "USR1", "--preemption-exit-code", "7"),
        List.of("sh", "-c", script)));
    Eventually.within(Duration.ofMinutes(1), "both commands started", () -> run.isDone()
        || Files.exists(tmp.resolve("ready-0")) && Files.exists(tmp.resolve("ready-1")));
    // With no task listening, SIGPWR's default would end this JVM: signal only a run still going.
    assertFalse(run.isDone(), "the run ended before both commands started: " + run);
    assertEquals(0, new ProcessBuilder("kill", "-PWR", Long.toString(ProcessHandle.current().pid())).start().waitFor());
    assertEquals(java.util.Optional.empty(), run.get(2, java.util.concurrent.TimeUnit.MINUTES));
    for (String mark : List.of("signalled-0", "signalled-1", "resumed-0", "resumed-1")) {
      assertTrue(Files.exists(tmp.resolve(mark)), mark + ": each command heard its signal, then ran again");
    }
  }
}
