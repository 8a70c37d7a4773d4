package io.muster.checkpoint;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.muster.testing.ChildJvm;
import java.io.IOException;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.stream.Stream;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * A process saving checkpoint 2 over checkpoint 1 is killed with SIGKILL at each step of the save:
 * the latest checkpoint is always complete and holds the old or the new values, never a mix, and
 * the next manager of the directory leaves no file of the killed save behind.
 */
class KilledSaveTest {

  private static MiniDfs hdfs;
  private static int runs;

  private static final java.nio.file.Path LOCAL_BASE = java.nio.file.Path.of("target", "killed-save").toAbsolutePath();

  @BeforeAll
  static void start() throws IOException {
    hdfs = new MiniDfs("killed");
    // the local runs' directories of earlier runs: one set per run, not one more per run
    FileSystem.getLocal(new Configuration()).delete(new Path(LOCAL_BASE.toUri()), true);
  }

  @AfterAll
  static void stop() {
    hdfs.close();
  }

  static Map<String, Tensor> model(float value) {
    float[] big = new float[1 << 18];
    java.util.Arrays.fill(big, value);
    return Map.of("layer/kernel", Tensor.ofFloats(new long[] {512, 512}, big),
        "layer/bias", Tensor.ofFloats(new long[] {2}, value, value),
        "step", Tensor.scalar((long) value));
  }

  static Stream<Arguments> cases() {
    return Stream.of("hdfs", "local").flatMap(fs -> Stream.of(SaveStep.values()).map(step -> Arguments.of(fs, step)));
  }

  @ParameterizedTest(name = "{0}, killed after {1}")
  @MethodSource("cases")
  void latestIsAlwaysACompleteCheckpoint(String kind, SaveStep step) throws Exception {
    Path dir;
    synchronized (KilledSaveTest.class) {
      runs++;
      dir = kind.equals("hdfs") ? hdfs.fileSystem().makeQualified(new Path("/killed-" + runs))
          : new Path(LOCAL_BASE.resolve(System.nanoTime() + "-" + runs).toUri());
    }
    FileSystem fs = dir.getFileSystem(hdfsConf(kind));
    CheckpointManager before = new CheckpointManager(fs, dir, WritePolicy.SINGLE_WORKER, CheckpointManager.Options.DEFAULTS);
    before.save(model(1));

    try (ChildJvm child = ChildJvm.start("save-" + kind + "-" + step, SaveAndStop.class,
        List.of(dir.toString(), "2", step.name()), Map.of(), java.nio.file.Path.of("target", "child-logs"))) {
      child.awaitOutput("AT " + step, Duration.ofSeconds(60));
      child.kill();
    }

    Optional<Path> latest = CheckpointManager.latestCheckpoint(fs, dir);
    assertTrue(latest.isPresent(), "a checkpoint is still the latest");
    Map<String, Tensor> restored = BundleReader.open(fs, latest.get()).readAll();
    float expected = step == SaveStep.STATE_REPLACED ? 2 : 1;
    for (float v : restored.get("layer/kernel").floats()) {
      assertEquals(expected, v);
    }
    assertEquals((long) expected, restored.get("step").longs()[0]);
    assertEquals(new Path(dir, expected == 2 ? "ckpt-2" : "ckpt-1"), latest.get());
    // and the next save by a new process just works
    CheckpointManager after = new CheckpointManager(fs, dir, WritePolicy.SINGLE_WORKER, CheckpointManager.Options.DEFAULTS);
    assertEquals(new Path(dir, expected == 2 ? "ckpt-3" : "ckpt-2"), after.save(model(3)));
    // nothing else is left: no temporary file, and no checkpoint the state file does not name (the
    // child kept one checkpoint, so a kill after the state was replaced left ckpt-1 to delete)
    String kept = expected == 2 ? "ckpt-2" : "ckpt-1";
    String next = expected == 2 ? "ckpt-3" : "ckpt-2";
    java.util.Set<String> left = new java.util.TreeSet<>();
    for (org.apache.hadoop.fs.FileStatus f : fs.listStatus(dir)) {
      left.add(f.getPath().getName());
    }
    assertEquals(new java.util.TreeSet<>(List.of("checkpoint", kept + ".index", kept + ".data-00000-of-00001",
        next + ".index", next + ".data-00000-of-00001")), left);
  }

  private static Configuration hdfsConf(String kind) throws IOException {
    return kind.equals("hdfs") ? hdfs.fileSystem().getConf() : new Configuration();
  }
}
