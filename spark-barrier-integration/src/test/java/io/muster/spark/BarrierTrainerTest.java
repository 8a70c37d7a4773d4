package io.muster.spark;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.muster.collective.ReduceOp;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.stream.IntStream;
import java.nio.file.Path;
import org.apache.hadoop.conf.Configuration;
import org.apache.spark.SparkConf;
import org.apache.spark.api.java.JavaRDD;
import org.apache.spark.api.java.JavaSparkContext;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** BarrierTrainer in Spark local[4]: real barrier stages, real gRPC servers and rings in the tasks. */
class BarrierTrainerTest {

  private static final String DRIVER_ONLY = "muster.test.driver-only";
  private static JavaSparkContext spark;

  @BeforeAll
  static void start() {
    spark = new JavaSparkContext(new SparkConf().setMaster("local[4]").setAppName("muster-test")
        .set("spark.ui.enabled", "false").set("spark.driver.host", "127.0.0.1")
        .set("spark.driver.bindAddress", "127.0.0.1")
        // only in the driver's Hadoop configuration; the second makes every file system a new one of it
        .set("spark.hadoop." + DRIVER_ONLY, "from-the-driver").set("spark.hadoop.fs.file.impl.disable.cache", "true"));
  }

  @AfterAll
  static void stop() {
    spark.stop();
  }

  @Test
  void aChiefAndTwoWorkersTrainTogetherWithTheDriversHadoopConfiguration(@TempDir Path tmp) {
    JavaRDD<Integer> numbers = spark.parallelize(IntStream.range(0, 300).boxed().toList(), 5);
    String dir = tmp.toUri().toString();
    String result = BarrierTrainer.builder().chief(true).numWorkers(2).build().fit(numbers, ctx -> {
      long[] sum = {0};
      ctx.rows().forEachRemaining(v -> sum[0] += v);
      boolean hasRows = sum[0] > 0;
      ctx.strategy().collectives().allReduce(sum, ReduceOp.SUM);
      String seen = ctx.fileSystem(new org.apache.hadoop.fs.Path(dir)).getConf().get(DRIVER_ONLY);
      String mine = ctx.task() + " rows>0=" + hasRows + " conf=" + seen + " local=" + new Configuration()
          .get(DRIVER_ONLY) + ";";
      ByteBuffer all = ctx.strategy().collectives().allGather(ByteBuffer.allocateDirect(mine.length())
          .put(mine.getBytes(StandardCharsets.US_ASCII)).flip());
      byte[] joined = new byte[all.remaining()];
      all.get(joined);
      return sum[0] + " " + new String(joined, StandardCharsets.US_ASCII);
    });
    assertEquals("44850 chief 0 rows>0=true conf=from-the-driver local=null;"
        + "worker 0 rows>0=true conf=from-the-driver local=null;worker 1 rows>0=true conf=from-the-driver local=null;",
        result);
  }

  @Test
  void aParameterServerGangRunsTheCoordinatorOnTheChiefAndClosuresOnTheWorkers() {
    org.apache.spark.sql.SparkSession session = org.apache.spark.sql.SparkSession.builder().sparkContext(spark.sc())
        .getOrCreate();
    String result = BarrierTrainer.builder().chief(true).numWorkers(2).ps(1).build().coordinate(session,
        BarrierTrainerTest::psFunctions, coordinator -> {
          coordinator.variables().create("count", new long[] {1}, io.muster.ps.Optimizer.NONE);
          java.util.Set<Long> workers = new java.util.TreeSet<>();
          List<io.muster.coordinator.RemoteValue> runs = new ArrayList<>();
          for (int i = 0; i < 60; i++) {
            runs.add(coordinator.schedule("count"));
          }
          coordinator.join();
          runs.forEach(r -> workers.add(r.fetch().longValue()));
          return coordinator.variables().variable("count").read()[0] + " on workers " + workers;
        });
    assertEquals("60.0 on workers [0, 1]", result);
  }

  @Test
  void aParameterServerGangNeedsAChiefAPsAndAWorker() {
    org.apache.spark.sql.SparkSession session = org.apache.spark.sql.SparkSession.builder().sparkContext(spark.sc())
        .getOrCreate();
    IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> BarrierTrainer.builder()
        .numWorkers(2).ps(1).build().coordinate(session, BarrierTrainerTest::psFunctions, c -> "never"));
    assertTrue(e.getMessage().startsWith("a parameter-server job needs chief(true), ps(n >= 1) and numWorkers(n >= 1)"),
        e.getMessage());
  }

  static io.muster.coordinator.Functions psFunctions() {
    return io.muster.coordinator.Functions.builder().function("count", (worker, args) -> {
      Thread.sleep(5);
      worker.variable("count").assignAdd(new float[] {1f});
      return io.muster.coordinator.Value.of((long) worker.task().index());
    }).build();
  }

  @Test
  void fourWorkersShareOneClusterInPartitionOrderAndReduceTheirShards() {
    JavaRDD<Integer> numbers = spark.parallelize(IntStream.range(0, 1000).boxed().toList(), 7);
    BarrierTrainer trainer = BarrierTrainer.builder().numWorkers(4).build();
    String result = trainer.fit(numbers, ctx -> {
      long[] sum = {0};
      ctx.rows().forEachRemaining(v -> sum[0] += v);
      ctx.strategy().collectives().allReduce(sum, ReduceOp.SUM);
      // every task checks that it is its partition and that its slot in the cluster is the port it
      // bound, and reports the cluster it was given; the chief collects them all
      if (ctx.task().index() != org.apache.spark.TaskContext.getPartitionId()) {
        throw new AssertionError(ctx.task() + " runs partition " + org.apache.spark.TaskContext.getPartitionId());
      }
      String bound = ctx.strategy().address().toString();
      if (!ctx.strategy().cluster().taskAddress(ctx.task()).equals(bound)) {
        throw new AssertionError(ctx.task() + " bound " + bound + " but the cluster lists "
            + ctx.strategy().cluster().taskAddress(ctx.task()));
      }
      String mine = ctx.task() + "=" + ctx.strategy().cluster();
      ByteBuffer bytes = ByteBuffer.allocateDirect(mine.length() * 4).put(mine.getBytes(StandardCharsets.UTF_8)).flip();
      ByteBuffer all = ctx.strategy().collectives().allGather(bytes);
      byte[] joined = new byte[all.remaining()];
      all.get(joined);
      return sum[0] + "|" + ctx.strategy().isChief() + "|" + ctx.attempt() + "|" + new String(joined, StandardCharsets.UTF_8);
    });
    String[] parts = result.split("\\|", 4);
    assertEquals("499500", parts[0], "the sum over every shard");
    assertEquals("true", parts[1], "the result is the chief's");
    assertEquals("0", parts[2], "first attempt");
    List<String> seen = new ArrayList<>();
    String rest = parts[3];
    for (int i = 0; i < 4; i++) {
      String prefix = "worker " + i + "=";
      int start = rest.indexOf(prefix);
      int end = i < 3 ? rest.indexOf("worker " + (i + 1) + "=") : rest.length();
      assertTrue(start >= 0 && end > start, rest);
      seen.add(rest.substring(start + prefix.length(), end));
    }
    assertEquals(1, seen.stream().distinct().count(), "every task saw the same cluster: " + seen);
    assertTrue(seen.get(0).startsWith("{\"worker\": [\"127.0.0.1:"), seen.get(0));
  }

  @Test
  void optionsAndTheApplicationAreCheckedBeforeAnyTaskStarts() {
    IllegalArgumentException zero = assertThrows(IllegalArgumentException.class,
        () -> BarrierTrainer.builder().numWorkers(0).build());
    assertEquals("numWorkers must be >= 1, was 0", zero.getMessage());
    assertEquals("untracked must not be null; leave it unset for its default", assertThrows(
        IllegalArgumentException.class, () -> BarrierTrainer.builder().untracked(null)).getMessage());
    assertEquals("rerun must not be null; leave it unset for its default", assertThrows(
        IllegalArgumentException.class, () -> BarrierTrainer.builder().rerun(null).build()).getMessage());
    BarrierTrainer tooMany = BarrierTrainer.builder().numWorkers(8).build();
    IllegalStateException slots = assertThrows(IllegalStateException.class,
        () -> tooMany.fit(spark.parallelize(List.of(1, 2, 3)), ctx -> "never"));
    assertEquals("the gang's 8 tasks exceed the 4 task slots this application can have at once (master local[4], "
        + "spark.task.cpus 1); lower numWorkers (or ps) or give the application more executors or cores",
        slots.getMessage());
    IllegalStateException dynamic = assertThrows(IllegalStateException.class, () -> BarrierTrainer.checkApplication(
        new SparkConf().set("spark.master", "yarn").set("spark.dynamicAllocation.enabled", "true"), 2, 0));
    assertTrue(dynamic.getMessage().startsWith("spark.dynamicAllocation.enabled is true"), dynamic.getMessage());
    SparkConf allGather = new SparkConf().set(BarrierTrainer.RENDEZVOUS, "allGather");
    assertTrue(BarrierTrainer.warnings(allGather).get(0).startsWith("spark.barrier.sync.timeout is 31536000 s"),
        "Spark's default of a year is worth a warning where allGather waits for it");
    assertEquals(List.of(), BarrierTrainer.warnings(allGather.clone().set("spark.barrier.sync.timeout", "600s")));
    assertEquals(List.of(), BarrierTrainer.warnings(new SparkConf()), "the driver's rendezvous has its own deadline");
    assertEquals("spark.muster.rendezvous must be 'driver' or 'allGather'; was 'spark'", assertThrows(
        IllegalArgumentException.class, () -> BarrierTrainer.checkApplication(
            new SparkConf().set(BarrierTrainer.RENDEZVOUS, "spark"), 2, 0)).getMessage());
    assertEquals("gangTimeout must be positive, was PT0S", assertThrows(IllegalArgumentException.class,
        () -> BarrierTrainer.builder().gangTimeout(java.time.Duration.ZERO).build()).getMessage());
    assertEquals(12, BarrierTrainer.taskSlots(new SparkConf().set("spark.master", "yarn")
        .set("spark.executor.instances", "3").set("spark.executor.cores", "8").set("spark.task.cpus", "2")));
    // standalone: spark-submit --total-executor-cores 3 --executor-cores 1, or whole Workers of 4 cores
    assertEquals(3, BarrierTrainer.taskSlots(new SparkConf().set("spark.master", "spark://host1:7077")
        .set("spark.cores.max", "3").set("spark.executor.cores", "1")));
    assertEquals(4, BarrierTrainer.taskSlots(new SparkConf().set("spark.master", "spark://host1:7077")
        .set("spark.cores.max", "10").set("spark.executor.cores", "4").set("spark.task.cpus", "2")));
    assertEquals(5, BarrierTrainer.taskSlots(new SparkConf().set("spark.master", "spark://host1:7077")
        .set("spark.cores.max", "10").set("spark.task.cpus", "2")));
  }

  @Test
  void aFailedGangIsReRunAndResumesFromItsBackup(@org.junit.jupiter.api.io.TempDir java.nio.file.Path tmp) {
    org.apache.hadoop.fs.Path backupDir = new org.apache.hadoop.fs.Path(tmp.resolve("backup").toUri());
    BarrierTrainer trainer = BarrierTrainer.builder().numWorkers(3).maxAttempts(2).build();
    String result = trainer.fit(spark.parallelize(IntStream.range(0, 30).boxed().toList(), 3), ctx -> {
      var backup = ctx.backupAndRestore(backupDir, io.muster.checkpoint.BackupAndRestore.EVERY_EPOCH);
      var resume = backup.restore(4, 1,
          java.util.Map.of("w", io.muster.checkpoint.Tensor.ofFloats(new long[] {1}, 0)));
      int firstEpoch = resume.map(io.muster.checkpoint.BackupAndRestore.ResumePoint::epoch).orElse(0);
      float[] w = {resume.map(p -> p.variables().get("w").floats()[0]).orElse(0f)};
      for (int epoch = firstEpoch; epoch < 4; epoch++) {
        if (ctx.attempt() == 0 && epoch == 2 && ctx.task().index() == 1) {
          throw new RetryableException("simulated crash of worker 1 in epoch 2");
        }
        float[] one = {1};
        ctx.strategy().allReduce(List.of(one)); // MEAN of ones: 1 on every replica
        w[0] += one[0];
        float value = w[0];
        backup.onEpochEnd(epoch, () -> java.util.Map.of("w", io.muster.checkpoint.Tensor.ofFloats(new long[] {1}, value)));
      }
      backup.onTrainEnd();
      return "attempt " + ctx.attempt() + " started at epoch " + firstEpoch + ", w=" + w[0];
    });
    assertEquals("attempt 1 started at epoch 2, w=4.0", result);
    assertTrue(!java.nio.file.Files.exists(tmp.resolve("backup").resolve("chief")), "the backup is gone after success");
  }

  /**
   * Every task of a failed gang still closing a file that blocks (as one whose HDFS pipeline holds
   * a DataNode on a host cut off does, for the client's socket timeouts): no task throws, so Spark
   * would not end the stage, and the slots stay held. Each is interrupted a second after its gang
   * failed, and the gang re-runs.
   */
  @Test
  void tasksStillClosingTheirFilesAfterTheirGangFailedAreInterruptedAndTheGangReRuns(@TempDir Path tmp)
      throws Exception {
    String closes = tmp.resolve("closes").toString();
    BarrierTrainer trainer = BarrierTrainer.builder().numWorkers(3).maxAttempts(2).build();
    String result = trainer.fit(spark.parallelize(IntStream.range(0, 30).boxed().toList(), 3), ctx -> {
      if (ctx.attempt() == 1) {
        return "attempt 1";
      }
      try {
        ctx.strategy().barrier("all-started");
        if (ctx.task().index() == 1) {
          ctx.strategy().abort("worker 1 lost its host");
        }
        ctx.strategy().allReduce(List.of(new float[] {1})); // throws on every task
        return "never";
      } finally {
        String how;
        try {
          Thread.sleep(30_000);
          how = "slept";
        } catch (InterruptedException e) {
          how = "interrupted";
        }
        synchronized (BarrierTrainerTest.class) {
          java.nio.file.Files.writeString(Path.of(closes), ctx.task() + " " + how + "\n",
              java.nio.file.StandardOpenOption.CREATE, java.nio.file.StandardOpenOption.APPEND);
        }
      }
    });
    assertEquals("attempt 1", result);
    assertEquals(List.of("worker 0 interrupted", "worker 1 interrupted", "worker 2 interrupted"),
        java.nio.file.Files.readAllLines(Path.of(closes)).stream().sorted().toList());
  }

  @Test
  void aTrainFunctionsOwnExceptionFailsTheRunOnceWithoutRetrying(@TempDir Path tmp) throws Exception {
    String attempts = tmp.resolve("attempts").toString(); // a String: the function travels to the tasks
    BarrierTrainer trainer = BarrierTrainer.builder().numWorkers(3).maxAttempts(3).build();
    IllegalStateException e = assertThrows(IllegalStateException.class,
        () -> trainer.fit(spark.parallelize(IntStream.range(0, 30).boxed().toList(), 3), ctx -> {
          synchronized (BarrierTrainerTest.class) {
            java.nio.file.Files.writeString(Path.of(attempts), ctx.attempt() + " " + ctx.task() + "\n",
                java.nio.file.StandardOpenOption.CREATE, java.nio.file.StandardOpenOption.APPEND);
          }
          ctx.strategy().barrier("all-started");
          if (ctx.task().index() == 1) {
            throw new IllegalArgumentException("label -1 in row 7");
          }
          ctx.strategy().allReduce(List.of(new float[] {1})); // fails when worker 1 is gone
          return "never";
        }));
    assertEquals(List.of("0 worker 0", "0 worker 1", "0 worker 2"),
        java.nio.file.Files.readAllLines(Path.of(attempts)).stream().sorted().toList(), "one attempt, not three");
    String message = e.getMessage();
    assertTrue(message.startsWith("training failed on attempt 1 of 3, not re-run (" + BarrierTrainer.FUNCTION_NOT_RERUN
        + "): "), message);
    assertTrue(message.matches("(?s)training failed on attempt 1 of 3, not re-run \\(.*\\): worker 1 on \\S+ \\(executor "
        + "driver\\) failed: java\\.lang\\.IllegalArgumentException: label -1 in row 7"), message);
  }

  private static final java.util.Map<String, Long> TASK_IDS = new java.util.concurrent.ConcurrentHashMap<>();

  /** Another job of the application holding one of the four slots until closed. */
  private AutoCloseable holdOneSlot() throws InterruptedException {
    java.util.concurrent.CountDownLatch holding = new java.util.concurrent.CountDownLatch(1);
    Thread holder = new Thread(() -> {
      spark.setJobGroup("muster-test-holder", "holds a slot", true);
      try {
        spark.parallelize(List.of(1), 1).foreach(x -> Thread.sleep(60_000));
      } catch (RuntimeException cancelled) {
        // the cancel below
      }
    });
    org.apache.spark.scheduler.SparkListener started = new org.apache.spark.scheduler.SparkListener() {
      @Override
      public void onTaskStart(org.apache.spark.scheduler.SparkListenerTaskStart start) {
        holding.countDown();
      }
    };
    spark.sc().addSparkListener(started);
    holder.start();
    assertTrue(holding.await(30, java.util.concurrent.TimeUnit.SECONDS), "the holding job started");
    return () -> {
      spark.cancelJobGroup("muster-test-holder");
      holder.join(30_000);
      spark.sc().removeSparkListener(started);
    };
  }

  @Test
  void aGangSparkCannotStartFailsAtItsTimeoutNamingTheMembersAndTheSlots() throws Exception {
    // Another job holds one of the four slots, so a barrier stage of four never starts.
    try (AutoCloseable held = holdOneSlot()) {
      BarrierTrainer gang = BarrierTrainer.builder().numWorkers(4).maxAttempts(1)
          .gangTimeout(java.time.Duration.ofSeconds(2)).build();
      IllegalStateException failed = assertThrows(IllegalStateException.class,
          () -> gang.fit(spark.parallelize(List.of(1, 2, 3, 4)), ctx -> "never"));
      assertTrue(failed.getMessage().startsWith("training failed on attempt 1 of 1: the gang was not formed within the "
          + "gang timeout of 2 s: worker 0, worker 1, worker 2, worker 3 were not started by Spark, which starts a "
          + "barrier stage only when it has 4 free task slots at once (executors: 127.0.0.1:"), failed.getMessage());
      assertTrue(failed.getMessage().endsWith(" running 1)"), "the holder's task: " + failed.getMessage());
    }
    Long sum = BarrierTrainer.builder().numWorkers(4).build().fit(spark.parallelize(List.of(1, 2, 3, 4)), ctx -> {
      long[] total = {0};
      ctx.rows().forEachRemaining(v -> total[0] += v);
      ctx.strategy().collectives().allReduce(total, ReduceOp.SUM);
      return total[0];
    });
    assertEquals(10L, sum, "the slots are free again, and a gang forms");
  }

  /** A re-run waits for slots a task still holds (on a cluster: one on a host cut off), for a bounded time. */
  @Test
  void aReRunWaitsForFreeSlotsUntilItsSlotTimeoutThenFailsNamingTheExecutors() throws Exception {
    try (AutoCloseable held = holdOneSlot()) {
      GangStartWatch.SlotsNotFreeException e = assertThrows(GangStartWatch.SlotsNotFreeException.class,
          () -> GangStartWatch.awaitFreeSlots(spark.sc(), 4, "attempt 2 of 2", java.time.Duration.ofSeconds(1),
              BarrierTrainer.SLOT_TIMEOUT, List.of()));
      assertTrue(e.getMessage().matches("the gang needs 4 free task slots at once, and 3 were free after 1 s "
          + "\\(spark\\.muster\\.slotTimeout\\): executors: 127\\.0\\.0\\.1:\\d+ running 1"), e.getMessage());
    }
    // the slot comes free during the wait
    AutoCloseable held = holdOneSlot();
    Thread release = new Thread(() -> {
      try {
        Thread.sleep(1000);
        held.close();
      } catch (Exception ignored) {
        // the assertion below fails instead
      }
    });
    release.start();
    long start = System.nanoTime();
    GangStartWatch.awaitFreeSlots(spark.sc(), 4, "attempt 2 of 2", java.time.Duration.ofSeconds(60),
        BarrierTrainer.SLOT_TIMEOUT, List.of());
    release.join();
    // it returned (no SlotsNotFreeException), and only once the holder's slot was free
    assertTrue(System.nanoTime() - start >= java.time.Duration.ofMillis(900).toNanos(), "it waited for the slot");
  }

  @Test
  void aSlotTimeoutThatIsNotAPositiveDurationIsRefused() {
    IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> BarrierTrainer.checkApplication(
        new SparkConf().set("spark.master", "local[4]").set(BarrierTrainer.SLOT_TIMEOUT, "0s"), 2, 0));
    assertEquals("spark.muster.slotTimeout must be a positive duration such as 90s or 10min; was '0s'", e.getMessage());
  }

  @Test
  void aGangWhoseTaskIsKilledIsReRun() throws Exception {
    TASK_IDS.clear();
    Thread killer = new Thread(() -> {
      try {
        while (TASK_IDS.size() < 2) {
          Thread.sleep(20);
        }
        Thread.sleep(300); // training is under way
        spark.sc().killTaskAttempt(TASK_IDS.get("worker 1"), true, "muster test: killed worker 1");
      } catch (InterruptedException ignored) {
        Thread.currentThread().interrupt();
      }
    }, "muster-test-killer");
    killer.start();
    BarrierTrainer trainer = BarrierTrainer.builder().numWorkers(2).maxAttempts(2).build();
    String result = trainer.fit(spark.parallelize(IntStream.range(0, 20).boxed().toList(), 2), ctx -> {
      if (ctx.attempt() == 0) {
        TASK_IDS.put(ctx.task().toString(), org.apache.spark.TaskContext.get().taskAttemptId());
        long until = System.nanoTime() + 60_000_000_000L;
        while (System.nanoTime() < until) {
          ctx.strategy().collectives().allReduce(new float[16], ReduceOp.SUM);
        }
        throw new IllegalStateException(ctx.task() + " was never killed");
      }
      return "attempt " + ctx.attempt();
    });
    killer.join();
    assertEquals("attempt 1", result);
  }

  @Test
  void gpusAreCheckedUpFrontAndRemappedThroughCudaVisibleDevices() {
    IllegalStateException none = assertThrows(IllegalStateException.class, () -> BarrierTrainer.checkApplication(
        new SparkConf().set("spark.master", "local[4]"), 2, 1));
    assertEquals("gpusPerWorker 1 needs spark.task.resource.gpu.amount >= 1 (and GPUs on the executors with a "
        + "discovery script), but it is not set", none.getMessage());
    BarrierTrainer.checkApplication(new SparkConf().set("spark.master", "local[4]")
        .set("spark.task.resource.gpu.amount", "1"), 2, 1);
    assertEquals(List.of("1", "3"), Gpus.visibleDevices(List.of("1", "3"), null));
    assertEquals(List.of("6", "4"), Gpus.visibleDevices(List.of("2", "0"), "4,5,6,7"));
    IllegalStateException outside = assertThrows(IllegalStateException.class,
        () -> Gpus.visibleDevices(List.of("2"), "4,5"));
    assertTrue(outside.getMessage().startsWith("Spark assigned GPU 2, but CUDA_VISIBLE_DEVICES=4,5 lists only 2"),
        outside.getMessage());
  }
}
