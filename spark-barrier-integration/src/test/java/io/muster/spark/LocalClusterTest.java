package io.muster.spark;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.muster.checkpoint.BackupAndRestore;
import io.muster.checkpoint.Tensor;
import io.muster.collective.ReduceOp;
import io.muster.testing.ChildJvm;
import io.muster.testing.Eventually;
import io.muster.testing.PythonTensorFlow;
import java.time.Duration;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Map;
import java.util.Optional;
import java.util.TreeMap;
import java.util.concurrent.CopyOnWriteArrayList;
import org.apache.spark.sql.SparkSession;

import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.List;
import java.util.stream.IntStream;
import org.apache.spark.SparkConf;
import org.apache.spark.api.java.JavaSparkContext;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Spark {@code local-cluster}: two executors, each a JVM of its own with two fake GPUs (a
 * discovery script) and {@code CUDA_VISIBLE_DEVICES=5,7}; the gang spans both JVMs.
 */
class LocalClusterTest {
  private static final org.slf4j.Logger log = org.slf4j.LoggerFactory.getLogger(LocalClusterTest.class);

  @TempDir static Path home;
  private static JavaSparkContext spark;

  @BeforeAll
  static void start() throws Exception {
    // Executors start from a "Spark home"; in testing mode they take this JVM's class path instead of its jars/.
    Files.createDirectories(home.resolve("launcher/target/scala-2.13"));
    Files.createDirectories(home.resolve("assembly/target/scala-2.13/jars"));
    Path discovery = home.resolve("gpus.sh");
    Files.writeString(discovery, "#!/bin/sh\necho '{\"name\": \"gpu\", \"addresses\": [\"0\", \"1\"]}'\n");
    Files.setPosixFilePermissions(discovery, PosixFilePermissions.fromString("rwxr-xr-x"));
    System.setProperty("spark.testing", "true");
    System.setProperty("spark.test.home", home.toString());
    spark = new JavaSparkContext(new SparkConf().setMaster("local-cluster[2,2,1024]").setAppName("muster-local-cluster")
        .set("spark.ui.enabled", "false").set("spark.driver.host", "127.0.0.1")
        .set("spark.driver.bindAddress", "127.0.0.1")
        // the executors' temporary files with this JVM's (the build's): one killed by a test leaves
        // lz4's native library behind, which would otherwise stay in /tmp
        .set("spark.executor.extraJavaOptions", System.getProperty("muster.spark.jvm.flags", "")
            + " -Djava.io.tmpdir=" + System.getProperty("java.io.tmpdir"))
        .set("spark.worker.resource.gpu.amount", "2")
        .set("spark.worker.resource.gpu.discoveryScript", discovery.toString())
        .set("spark.executor.resource.gpu.amount", "2")
        .set("spark.task.resource.gpu.amount", "1")
        .set("spark.executorEnv.CUDA_VISIBLE_DEVICES", "5,7")
        .set("spark.decommission.enabled", "true")
        // executors that never come up fail the job in about a minute, not Spark's default of ten
        .set("spark.scheduler.barrier.maxConcurrentTasksCheck.interval", "2s")
        .set("spark.scheduler.barrier.maxConcurrentTasksCheck.maxFailures", "30"));
  }

  @AfterAll
  static void stop() {
    if (spark != null) {
      spark.stop();
    }
    System.clearProperty("spark.testing");
    System.clearProperty("spark.test.home");
  }

  @Test
  void fourWorkersInTwoExecutorJvmsTrainTogetherEachWithItsOwnGpu() {
    BarrierTrainer trainer = BarrierTrainer.builder().numWorkers(4).gpusPerWorker(1).build();
    long[] seen = trainer.fit(spark.parallelize(IntStream.range(0, 100).boxed().toList(), 4), ctx -> {
      long[] sum = {0};
      ctx.rows().forEachRemaining(v -> sum[0] += v);
      ctx.strategy().collectives().allReduce(sum, ReduceOp.SUM);
      // every task tells the chief its sum, its JVM and its GPU
      return ctx.strategy().collectives().allGather(new long[] {sum[0], ProcessHandle.current().pid(),
          Long.parseLong(String.join(",", ctx.gpus()))});
    });
    Map<Long, List<Long>> gpusByJvm = new TreeMap<>();
    for (int i = 0; i < 4; i++) {
      assertEquals(4950, seen[3 * i], "worker " + i + "'s all-reduced sum");
      gpusByJvm.computeIfAbsent(seen[3 * i + 1], k -> new ArrayList<>()).add(seen[3 * i + 2]);
    }
    assertEquals(2, gpusByJvm.size(), "two executor JVMs: " + gpusByJvm);
    assertFalse(gpusByJvm.containsKey(ProcessHandle.current().pid()), "no task ran in the driver");
    gpusByJvm.values().forEach(gpus -> assertEquals(List.of(5L, 7L), gpus.stream().sorted().toList(),
        "Spark's GPUs 0 and 1 of each executor, remapped through its CUDA_VISIBLE_DEVICES=5,7: " + gpusByJvm));
  }

  @Test
  void commandsInExecutorJvmsGetTheirGpuAndStreamTheirLinesToTheDriver() {
    List<CommandLine> lines = new CopyOnWriteArrayList<>();
    BarrierTrainer trainer = BarrierTrainer.builder().numWorkers(4).gpusPerWorker(1).commandLogs(lines::add).build();
    Optional<byte[]> result = trainer.run(SparkSession.builder().sparkContext(spark.sc()).getOrCreate(),
        ExternalCommand.of(ChildJvm.command("64m", ShardCheck.class, List.of("check"))));
    assertEquals("chief of attempt 0", new String(result.orElseThrow(), StandardCharsets.UTF_8));
    List<String> cuda = lines.stream().map(CommandLine::text).filter(t -> t.startsWith("cuda ["))
        .map(t -> t.substring("cuda [".length(), t.indexOf(']'))).sorted().toList();
    assertEquals(List.of("5", "5", "7", "7"), cuda, "one GPU per command, from its executor's two: " + lines);
  }

  /** Worker 1 of the first run sends its own executor JVM {@code signal} during {@code epoch}, after {@code step}. */
  private record Fault(String signal, int epoch, int step, String marker) implements java.io.Serializable {}

  /**
   * Linear regression y = 3x + 1 on each task's rows, {@code steps} full-batch steps per epoch,
   * gradients averaged with all-reduce, a backup every epoch and where the gang agrees to save for
   * a preemption. With a {@code fault}, worker 1 signals its own executor once (a marker file).
   * Returns, for every rank in rank order: its two final weights, the attempt, and the epoch and
   * step it started at.
   */
  private static float[] regression(String backupDir, int steps, int maxAttempts, Fault fault) throws Exception {
    BarrierTrainer trainer = BarrierTrainer.builder().numWorkers(4).gpusPerWorker(1).maxAttempts(maxAttempts).build();
    return trainer.fit(spark.parallelize(IntStream.range(0, 40).boxed().toList(), 4), ctx -> {
      List<Integer> xs = new ArrayList<>();
      ctx.rows().forEachRemaining(xs::add);
      // A shard holds the same rows in every run, but in the order the repartition's shuffle
      // fetched them, which varies: sorted, the float sums below are the same in every run.
      xs.sort(null);
      var backup = ctx.backupAndRestore(new org.apache.hadoop.fs.Path(backupDir), BackupAndRestore.EVERY_EPOCH)
          .saveOnPreemption(ctx.strategy().preemption());
      int epochs = 6;
      var resume = backup.restore(epochs, steps, Map.of("w", Tensor.ofFloats(new long[] {2}, 0, 0)));
      float[] w = resume.map(p -> p.variables().get("w").floats()).orElse(new float[2]);
      int firstEpoch = resume.map(BackupAndRestore.ResumePoint::epoch).orElse(0);
      int firstStep = resume.map(BackupAndRestore.ResumePoint::step).orElse(0);
      for (int epoch = firstEpoch; epoch < epochs; epoch++) {
        for (int step = epoch == firstEpoch ? firstStep : 0; step < steps; step++) {
          if (fault != null && epoch == fault.epoch() && step == fault.step() && ctx.task().index() == 1
              && new java.io.File(fault.marker()).createNewFile()) {
            new ProcessBuilder("kill", "-" + fault.signal(), Long.toString(ProcessHandle.current().pid())).start()
                .waitFor();
            if (fault.signal().equals("KILL")) {
              Thread.sleep(60_000); // never returns: the JVM is gone
            }
            // The signal reaches the task within milliseconds, when steps take less: wait for it, so
            // that the step the gang saves after is always the next one.
            Eventually.within(Duration.ofSeconds(10), "the preemption notice reached worker 1",
                () -> ctx.strategy().preemption().requested());
          }
          float[] gradient = new float[2];
          for (int x : xs) {
            float error = w[0] * x + w[1] - (3f * x + 1f);
            gradient[0] += 2 * error * x / xs.size();
            gradient[1] += 2 * error / xs.size();
          }
          ctx.strategy().allReduce(List.of(gradient)); // MEAN over the ranks
          w[0] -= 0.001f / steps * gradient[0];
          w[1] -= 0.001f / steps * gradient[1];
          float[] now = w.clone();
          backup.onStepEnd(epoch, step, () -> Map.of("w", Tensor.ofFloats(new long[] {2}, now)));
        }
        float[] now = w.clone();
        backup.onEpochEnd(epoch, () -> Map.of("w", Tensor.ofFloats(new long[] {2}, now)));
      }
      backup.onTrainEnd();
      return ctx.strategy().collectives().allGather(new float[] {w[0], w[1], ctx.attempt(), firstEpoch, firstStep});
    });
  }

  /** Every rank of {@code resumed} ran {@code attempt} from (epoch, step), and ends with the uninterrupted run's weights. */
  private static void assertResumedBitForBit(float[] uninterrupted, float[] resumed, int attempt, int epoch, int step) {
    String both = java.util.Arrays.toString(uninterrupted) + " vs " + java.util.Arrays.toString(resumed);
    assertEquals(20, resumed.length, both);
    for (int rank = 0; rank < 4; rank++) {
      assertEquals(0f, uninterrupted[5 * rank + 2], "uninterrupted: attempt 0; " + both);
      assertEquals(0f, uninterrupted[5 * rank + 3] + uninterrupted[5 * rank + 4], "uninterrupted: from the start; "
          + both);
      assertEquals(attempt, resumed[5 * rank + 2], "the gang ran again; " + both);
      assertEquals(epoch, resumed[5 * rank + 3], "resumed in the epoch of the fault; " + both);
      assertEquals(step, resumed[5 * rank + 4], "at the step the backup holds; " + both);
      for (int i = 0; i < 2; i++) { // every rank ends with the uninterrupted run's weights, bit for bit
        assertEquals(Float.floatToRawIntBits(uninterrupted[i]), Float.floatToRawIntBits(uninterrupted[5 * rank + i]), both);
        assertEquals(Float.floatToRawIntBits(uninterrupted[i]), Float.floatToRawIntBits(resumed[5 * rank + i]), both);
      }
    }
  }

  @Test
  void aGangReRunAfterAnExecutorJvmIsKilledEndsWithTheUninterruptedRunsWeightsBitForBit(@TempDir Path tmp)
      throws Exception {
    float[] uninterrupted = regression(tmp.resolve("backup-a").toString(), 1, 3, null);
    Path marker = tmp.resolve("killed-once");
    float[] resumed = regression(tmp.resolve("backup-b").toString(), 1, 3, new Fault("KILL", 2, 0, marker.toString()));
    assertTrue(Files.exists(marker), "worker 1 killed its executor");
    assertResumedBitForBit(uninterrupted, resumed, 1, 2, 0); // from the backup at epoch 2's start
  }

  /**
   * Spark decommissions an executor (SIGPWR, what Kubernetes' pre-stop script sends) while its task
   * trains: the task hears it, the gang saves after one step every rank agrees on, leaves, and runs
   * again from that step, uncounted (one attempt allowed), with the uninterrupted run's weights.
   */
  @Test
  void aDecommissionedExecutorsGangSavesAtAnAgreedStepAndResumesThereUncounted(@TempDir Path tmp) throws Exception {
    float[] uninterrupted = regression(tmp.resolve("backup-a").toString(), 8, 1, null);
    Path marker = tmp.resolve("decommissioned-once");
    float[] resumed = regression(tmp.resolve("backup-b").toString(), 8, 1, new Fault("PWR", 2, 3, marker.toString()));
    assertTrue(Files.exists(marker), "worker 1 had its executor decommissioned");
    // The notice came before step 3 (from 0): the gang agreed to save after step 4, and resumed at 5.
    assertResumedBitForBit(uninterrupted, resumed, 1, 2, 5);
  }

  /**
   * Real TensorFlow's {@code PreemptionCheckpointHandler} under Spark: an executor is decommissioned
   * while its command trains; the notice reaches both commands as SIGTERM, they save at a step they
   * agree on and exit with 42, and the gang runs again from that step, uncounted (one attempt
   * allowed), ending with the uninterrupted run's weights.
   */
  @Test
  void realTensorFlowCommandsSaveOnAnExecutorsDecommissionAndResumeThereUncounted(@TempDir Path tmp) throws Exception {
    Path python = PythonTensorFlow.python();
    Path script = PythonTensorFlow.script("preemption_train.py", tmp);
    List<CommandLine> uninterrupted = trainWithTensorFlow(python, script, "0", tmp.resolve("uninterrupted"), () -> { });
    List<CommandLine> preempted = trainWithTensorFlow(python, script, "0.2", tmp.resolve("preempted"),
        LocalClusterTest::decommissionWorker0sExecutor);

    List<String> texts = preempted.stream().map(CommandLine::text).toList();
    List<String> resumed = texts.stream().filter(t -> t.startsWith("attempt 1 starts at step ")).distinct().toList();
    assertEquals(1, resumed.size(), "both tasks resumed at one step: " + resumed);
    int savedAt = Integer.parseInt(resumed.get(0).substring("attempt 1 starts at step ".length()));
    int lastDoneBefore = texts.subList(0, texts.indexOf(resumed.get(0))).stream().filter(t -> t.matches("step \\d+ done"))
        .mapToInt(t -> Integer.parseInt(t.split(" ")[1])).max().orElse(0);
    assertTrue(savedAt > 5 && savedAt < 80, "saved mid-run: " + resumed);
    assertEquals(lastDoneBefore, savedAt, "no step done before the save is trained again");
    assertEquals(weights(uninterrupted), weights(preempted), "the weights of the uninterrupted run");
    log.info("figures: TensorFlow under Spark saved at step {} of 80 on the decommission notice, 0 steps lost (the "
        + "epoch backup alone would lose {})", savedAt, savedAt % 20);
  }

  /**
   * Runs the TensorFlow script with a chief and a worker, one attempt allowed, steps taking at least
   * {@code stepSeconds}; {@code meanwhile} runs once both commands have trained 5 steps. The lines the
   * commands printed.
   */
  private static List<CommandLine> trainWithTensorFlow(Path python, Path script, String stepSeconds, Path output,
      Runnable meanwhile) throws Exception {
    List<CommandLine> lines = new CopyOnWriteArrayList<>();
    BarrierTrainer trainer = BarrierTrainer.builder().chief(true).numWorkers(1).maxAttempts(1)
        .commandLogs(lines::add).build();
    // The handler asks the GCE metadata server whether it runs on Google's cloud: a closed port on
    // the loopback says no at once, and the test talks to nothing beyond this machine.
    ExternalCommand command = ExternalCommand.of(python.toString(), script.toString(), stepSeconds)
        .withOutputDir(output.toString())
        .withEnvironment(Map.of("GCE_METADATA_IP", "127.0.0.1:1", "TF_CPP_MIN_LOG_LEVEL", "2"));
    var run = java.util.concurrent.CompletableFuture.supplyAsync(() -> trainer.run(
        SparkSession.builder().sparkContext(spark.sc()).getOrCreate(), command));
    Eventually.within(Duration.ofMinutes(3), "both commands trained 5 steps", () -> run.isDone()
        || lines.stream().filter(l -> l.text().equals("step 5 done")).count() == 2);
    meanwhile.run();
    run.get(5, java.util.concurrent.TimeUnit.MINUTES);
    return lines;
  }

  /** Sends SIGPWR to the executor JVM running worker 0's command (a child of this JVM, in local-cluster mode). */
  private static void decommissionWorker0sExecutor() {
    long self = ProcessHandle.current().pid();
    ProcessHandle executor = ProcessHandle.current().descendants()
        .filter(p -> environment(p).contains("MUSTER_TASK_TYPE=worker") && environment(p).contains("MUSTER_TASK_INDEX=0"))
        .map(p -> {
          ProcessHandle up = p;
          while (up.parent().isPresent() && up.parent().get().pid() != self) {
            up = up.parent().get();
          }
          return up;
        })
        .findFirst().orElseThrow(() -> new AssertionError("no process of worker 0's command among this JVM's"));
    try {
      assertEquals(0, new ProcessBuilder("kill", "-PWR", Long.toString(executor.pid())).start().waitFor());
    } catch (java.io.IOException | InterruptedException e) {
      throw new AssertionError("cannot signal executor " + executor.pid(), e);
    }
  }

  /** A process's environment as {@code NAME=value} entries (empty when it has gone). */
  private static List<String> environment(ProcessHandle process) {
    try {
      return List.of(Files.readString(Path.of("/proc", Long.toString(process.pid()), "environ"),
          StandardCharsets.ISO_8859_1).split("\0"));
    } catch (java.io.IOException e) {
      return List.of();
    }
  }

  /** The weights' digests the chief and the worker printed at the end. */
  private static List<String> weights(List<CommandLine> lines) {
    List<String> digests = lines.stream().filter(l -> l.text().startsWith("weights-sha256 "))
        .map(l -> l.task() + " " + l.text()).sorted().toList();
    assertEquals(2, digests.size(), "the chief and the worker printed their weights: " + lines);
    return digests;
  }
}
