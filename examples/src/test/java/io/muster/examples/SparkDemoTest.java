package io.muster.examples;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.muster.checkpoint.CheckpointManager;
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
    assumeTrue(Files.exists(DIGITS), "../shared/data/digits.csv is not here (a user's clone has no shared/): skipped");
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
    SparkDemo.Result one = SparkDemo.run(spark, DIGITS.toString(), tmp.resolve("one").toString(), 1, 15, 64, 0.2f, 7);
    SparkDemo.Result four = SparkDemo.run(spark, DIGITS.toString(), tmp.resolve("four").toString(), 4, 15, 64, 0.2f, 7);
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
}
