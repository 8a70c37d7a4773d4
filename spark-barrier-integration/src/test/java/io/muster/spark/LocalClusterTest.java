package io.muster.spark;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;

import io.muster.collective.ReduceOp;
import io.muster.testing.ChildJvm;
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
        .set("spark.executor.extraJavaOptions", System.getProperty("muster.spark.jvm.flags", ""))
        .set("spark.worker.resource.gpu.amount", "2")
        .set("spark.worker.resource.gpu.discoveryScript", discovery.toString())
        .set("spark.executor.resource.gpu.amount", "2")
        .set("spark.task.resource.gpu.amount", "1")
        .set("spark.executorEnv.CUDA_VISIBLE_DEVICES", "5,7")
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
}
