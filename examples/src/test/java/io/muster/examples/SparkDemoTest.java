package io.muster.examples;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.muster.checkpoint.BundleReader;
import io.muster.checkpoint.CheckpointManager;
import io.muster.checkpoint.Tensor;
import io.muster.summary.EventFiles;
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

  private static Map<String, Tensor> latest(FileSystem fs, String dir) throws Exception {
    org.apache.hadoop.fs.Path ckpt = new org.apache.hadoop.fs.Path(dir);
    return BundleReader.open(fs, CheckpointManager.latestCheckpoint(fs, ckpt).orElseThrow()).readAll();
  }
}
