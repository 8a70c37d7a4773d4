package io.muster.checkpoint;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.muster.proto.tf.CheckpointState;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.OptionalInt;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.stream.Collectors;
import java.util.stream.Stream;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;

/** CheckpointManager on HDFS (MiniDFSCluster) and on the local file system. */
class CheckpointManagerTest {

  private static final java.nio.file.Path LOCAL_BASE = java.nio.file.Path.of("target", "manager-test").toAbsolutePath();
  private static MiniDfs hdfs;
  private static int dirs;

  @BeforeAll
  static void startHdfs() throws IOException {
    hdfs = new MiniDfs("manager");
    FileSystem.getLocal(new Configuration()).delete(new Path(LOCAL_BASE.toUri()), true);
  }

  @AfterAll
  static void stopHdfs() {
    hdfs.close();
  }

  static Stream<String> fileSystems() {
    return Stream.of("hdfs", "local");
  }

  private static synchronized Path freshDir(String kind) throws IOException {
    dirs++;
    if (kind.equals("hdfs")) {
      return hdfs.fileSystem().makeQualified(new Path("/ckpt-" + dirs));
    }
    java.nio.file.Path local = LOCAL_BASE.resolve("dir-" + dirs);
    return new Path(local.toUri());
  }

  private static FileSystem fs(Path dir) throws IOException {
    return dir.getFileSystem(new Configuration());
  }

  private static FileSystem fsOf(String kind, Path dir) throws IOException {
    return kind.equals("hdfs") ? hdfs.fileSystem() : fs(dir);
  }

  private static Map<String, Tensor> model(float value) {
    return Map.of("dense/kernel", Tensor.ofFloats(new long[] {2, 2}, value, value, value, value),
        "step", Tensor.scalar((long) value));
  }

  private static List<String> names(FileSystem fs, Path dir) throws IOException {
    return Arrays.stream(fs.listStatus(dir)).map(FileStatus::getPath).map(Path::getName).sorted().toList();
  }

  @ParameterizedTest(name = "{0}")
  @MethodSource("fileSystems")
  void savesNumberedCheckpointsKeepsTheNewestAndWritesTensorFlowsStateFile(String kind) throws Exception {
    Path dir = freshDir(kind);
    FileSystem fs = fsOf(kind, dir);
    CheckpointManager manager = new CheckpointManager(fs, dir, WritePolicy.SINGLE_WORKER,
        CheckpointManager.Options.DEFAULTS.withMaxToKeep(2));
    for (int i = 1; i <= 4; i++) {
      assertEquals(new Path(dir, "ckpt-" + i), manager.save(model(i)));
    }
    assertEquals(List.of("checkpoint", "ckpt-3.data-00000-of-00001", "ckpt-3.index", "ckpt-4.data-00000-of-00001",
        "ckpt-4.index"), names(fs, dir));
    assertEquals(Optional.of(new Path(dir, "ckpt-4")), manager.latest());
    CheckpointState state = CheckpointManager.readState(fs, dir).orElseThrow();
    assertEquals("ckpt-4", state.getModelCheckpointPath());
    assertEquals(List.of("ckpt-3", "ckpt-4"), state.getAllModelCheckpointPathsList());
    assertEquals(2, state.getAllModelCheckpointTimestampsCount());
    String text = new String(fs.open(new Path(dir, "checkpoint")).readAllBytes(), StandardCharsets.UTF_8);
    assertTrue(text.startsWith("model_checkpoint_path: \"ckpt-4\"\nall_model_checkpoint_paths: \"ckpt-3\"\n"), text);
    assertArrayEquals(new float[] {4, 4, 4, 4}, manager.restore(manager.latest().orElseThrow()).get("dense/kernel").floats());
  }

  @Test
  void restoringAgainstTheCallersVariablesRefusesOtherShapesAndDtypes(@org.junit.jupiter.api.io.TempDir
      java.nio.file.Path tmp) throws Exception {
    Path dir = new Path(tmp.toUri());
    FileSystem fs = FileSystem.getLocal(new org.apache.hadoop.conf.Configuration()).getRawFileSystem();
    try (CheckpointManager manager = new CheckpointManager(fs, dir, WritePolicy.SINGLE_WORKER,
        CheckpointManager.Options.DEFAULTS)) {
      Path saved = manager.save(model(3));
      assertArrayEquals(new float[] {3, 3, 3, 3}, manager.restore(saved, model(0)).get("dense/kernel").floats());
      CheckpointMismatchException e = assertThrows(CheckpointMismatchException.class, () -> manager.restore(saved,
          Map.of("dense/kernel", Tensor.ofFloats(new long[] {4}, 0, 0, 0, 0), "step", Tensor.ofInts(new long[0], 0))));
      assertEquals(saved + " holds another model: dense/kernel is float32[2, 2] there but float32[4] here; "
          + "step is int64[] there but int32[] here", e.getMessage());
    }
  }

  /** The live checkpoint I/O threads, of every owner. */
  static Set<Thread> ioThreads() {
    return Thread.getAllStackTraces().keySet().stream()
        .filter(t -> t.getName().startsWith(IoThreads.THREAD_PREFIX)).collect(Collectors.toSet());
  }

  @ParameterizedTest(name = "{0}")
  @MethodSource("fileSystems")
  void closingTheManagerEndsItsIoThreadsAndLeavesItsCheckpointsReadable(String kind) throws Exception {
    Path dir = freshDir(kind);
    FileSystem fs = fsOf(kind, dir);
    Set<Thread> before = ioThreads();
    Path saved;
    Set<Thread> own;
    try (CheckpointManager manager = new CheckpointManager(fs, dir, WritePolicy.SINGLE_WORKER,
        CheckpointManager.Options.DEFAULTS)) {
      saved = manager.save(model(1));
      own = new HashSet<>(ioThreads());
      own.removeAll(before);
      assertFalse(own.isEmpty(), "the save wrote its index and state on the manager's threads");
      assertTrue(own.stream().allMatch(Thread::isDaemon));
    }
    assertEquals(Set.of(), own.stream().filter(Thread::isAlive).collect(Collectors.toSet()));
    CheckpointManager closed = new CheckpointManager(fs, dir, WritePolicy.SINGLE_WORKER,
        CheckpointManager.Options.DEFAULTS);
    closed.close();
    assertArrayEquals(new float[] {1, 1, 1, 1}, closed.restore(saved).get("dense/kernel").floats());
    IllegalStateException refused = assertThrows(IllegalStateException.class, () -> closed.save(model(2)));
    assertTrue(refused.getMessage().contains(dir.toString()), refused.getMessage());
  }

  @ParameterizedTest(name = "{0}")
  @MethodSource("fileSystems")
  void aNewManagerRecoversTheListAndTheNumbering(String kind) throws Exception {
    Path dir = freshDir(kind);
    FileSystem fs = fsOf(kind, dir);
    CheckpointManager first = new CheckpointManager(fs, dir, WritePolicy.SINGLE_WORKER,
        CheckpointManager.Options.DEFAULTS.withMaxToKeep(3));
    first.save(model(1));
    first.save(model(2));
    CheckpointManager second = new CheckpointManager(fs, dir, WritePolicy.SINGLE_WORKER,
        CheckpointManager.Options.DEFAULTS.withMaxToKeep(3));
    assertEquals(List.of(new Path(dir, "ckpt-1"), new Path(dir, "ckpt-2")), second.checkpoints());
    assertEquals(new Path(dir, "ckpt-3"), second.save(model(3)));
    second.save(model(4));
    assertFalse(fs.exists(new Path(dir, "ckpt-1.index")), "the recovered oldest is swept");
  }

  @ParameterizedTest(name = "{0}")
  @MethodSource("fileSystems")
  void keepEveryPreservesOldCheckpointsOutsideTheManagedList(String kind) throws Exception {
    Path dir = freshDir(kind);
    FileSystem fs = fsOf(kind, dir);
    CheckpointManager manager = new CheckpointManager(fs, dir, WritePolicy.SINGLE_WORKER,
        CheckpointManager.Options.DEFAULTS.withMaxToKeep(1).withKeepEvery(Duration.ofMillis(1)));
    manager.save(model(1));
    Thread.sleep(20);
    manager.save(model(2));
    Thread.sleep(20);
    manager.save(model(3));
    assertTrue(fs.exists(new Path(dir, "ckpt-1.index")) && fs.exists(new Path(dir, "ckpt-2.index")), "preserved");
    assertEquals(List.of(new Path(dir, "ckpt-3")), manager.checkpoints());
    assertTrue(CheckpointManager.readState(fs, dir).orElseThrow().getLastPreservedTimestamp() > 0);
    new CheckpointManager(fs, dir, WritePolicy.SINGLE_WORKER,
        CheckpointManager.Options.DEFAULTS.withMaxToKeep(1).withKeepEvery(Duration.ofMillis(1)));
    assertTrue(fs.exists(new Path(dir, "ckpt-1.index")) && fs.exists(new Path(dir, "ckpt-2.index")),
        "a new manager keeps the preserved checkpoints the state file does not name");
  }

  @ParameterizedTest(name = "{0}")
  @MethodSource("fileSystems")
  void fourTasksSavingAtOnceLeaveOnlyTheChiefsCheckpoints(String kind) throws Exception {
    Path dir = freshDir(kind);
    FileSystem fs = fsOf(kind, dir);
    List<CompletableFuture<Void>> tasks = new ArrayList<>();
    io.muster.cluster.ClusterSpec cluster = io.muster.cluster.ClusterSpec.of(Map.of("chief", List.of("h:1"),
        "worker", List.of("h:2", "h:3", "h:4")));
    List<io.muster.cluster.TaskId> roles = List.of(new io.muster.cluster.TaskId("chief", 0),
        new io.muster.cluster.TaskId("worker", 0), new io.muster.cluster.TaskId("worker", 1),
        new io.muster.cluster.TaskId("worker", 2));
    for (int task = 0; task < 4; task++) {
      WritePolicy policy = WritePolicy.of(cluster, roles.get(task)); // the chief, then workers 0..2
      float value = task + 1;
      tasks.add(CompletableFuture.runAsync(() -> {
        try {
          CheckpointManager manager = new CheckpointManager(fs, dir, policy,
              CheckpointManager.Options.DEFAULTS.withMaxToKeep(2));
          for (int round = 0; round < 4; round++) {
            manager.save(model(value));
          }
        } catch (IOException e) {
          throw new java.io.UncheckedIOException(e);
        }
      }));
    }
    CompletableFuture.allOf(tasks.toArray(CompletableFuture[]::new)).get(120, TimeUnit.SECONDS);
    assertEquals(List.of("checkpoint", "ckpt-3.data-00000-of-00001", "ckpt-3.index", "ckpt-4.data-00000-of-00001",
        "ckpt-4.index"), names(fs, dir));
    assertEquals(List.of("ckpt-3", "ckpt-4"), CheckpointManager.readState(fs, dir).orElseThrow().getAllModelCheckpointPathsList());
    CheckpointManager reader = new CheckpointManager(fs, dir, WritePolicy.SINGLE_WORKER, CheckpointManager.Options.DEFAULTS);
    assertArrayEquals(new float[] {1, 1, 1, 1}, reader.restore(reader.latest().orElseThrow()).get("dense/kernel").floats(),
        "the chief's values");
  }

  /** What one complete checkpoint {@code ckpt-1} and its state file leave in a directory. */
  private static final List<String> ONLY_CKPT_1 = List.of("checkpoint", "ckpt-1.data-00000-of-00001", "ckpt-1.index");

  @ParameterizedTest(name = "{0}")
  @MethodSource("fileSystems")
  void aFailedSaveNamesThePathAndLeavesThePreviousCheckpoint(String kind) throws Exception {
    Path dir = freshDir(kind);
    FileSystem fs = fsOf(kind, dir);
    CheckpointManager manager = new CheckpointManager(fs, dir, WritePolicy.SINGLE_WORKER, CheckpointManager.Options.DEFAULTS);
    manager.save(model(1));
    // A tensor that cannot be encoded fails the save while the new state file is being written
    // under its temporary name: that file must go too.
    Map<String, Tensor> bad = Map.of("", Tensor.scalar(1));
    IOException e = assertThrows(IOException.class, () -> manager.save(bad));
    assertTrue(e.getMessage().startsWith("could not save checkpoint " + new Path(dir, "ckpt-2")), e.getMessage());
    assertTrue(e.getMessage().endsWith("the latest complete checkpoint is still " + new Path(dir, "ckpt-1")), e.getMessage());
    assertEquals(Optional.of(new Path(dir, "ckpt-1")), manager.latest());
    assertEquals(ONLY_CKPT_1, names(fs, dir), "no temporary or half-written file is left");
  }

  @ParameterizedTest(name = "{0}")
  @MethodSource("fileSystems")
  void aSaveThatFailsAfterItsBytesAreWrittenRemovesEveryFileOfIt(String kind) throws Exception {
    Path dir = freshDir(kind);
    FileSystem fs = fsOf(kind, dir);
    // The save fails once its data file is renamed into place: the state and the index are
    // written under temporary names by then, and the index is not renamed yet.
    boolean[] failing = {false};
    CheckpointManager manager = new CheckpointManager(fs, dir, WritePolicy.SINGLE_WORKER,
        CheckpointManager.Options.DEFAULTS, step -> {
          if (failing[0] && step == SaveStep.DATA_WRITTEN) {
            throw new IllegalStateException("failed after " + step);
          }
        });
    manager.save(model(1));
    failing[0] = true;
    IOException e = assertThrows(IOException.class, () -> manager.save(model(2)));
    assertTrue(e.getMessage().startsWith("could not save checkpoint " + new Path(dir, "ckpt-2")), e.getMessage());
    assertTrue(e.getMessage().endsWith("the latest complete checkpoint is still " + new Path(dir, "ckpt-1")), e.getMessage());
    assertEquals(Optional.of(new Path(dir, "ckpt-1")), manager.latest());
    assertEquals(ONLY_CKPT_1, names(fs, dir), "the renamed data file and every temporary file are deleted");
    assertEquals(List.of("ckpt-1"), CheckpointManager.readState(fs, dir).orElseThrow().getAllModelCheckpointPathsList());
    failing[0] = false;
    Path next = manager.save(model(2));
    assertEquals(Optional.of(next), manager.latest(), "the manager saves on after the failure");
    assertArrayEquals(new float[] {2, 2, 2, 2}, manager.restore(manager.latest().orElseThrow()).get("dense/kernel").floats());
  }

  @ParameterizedTest(name = "{0}")
  @MethodSource("fileSystems")
  void aDirectoryUnderAFileIsAClearError(String kind) throws Exception {
    Path dir = freshDir(kind);
    FileSystem fs = fsOf(kind, dir);
    fs.create(dir).close(); // a file where the directory should be
    Path sub = new Path(dir, "sub");
    // HDFS refuses already to list a directory under a file; the local file system finds none and
    // fails at the save. Either way the message names the path.
    IOException e = assertThrows(IOException.class, () -> new CheckpointManager(fs, sub, WritePolicy.SINGLE_WORKER,
        CheckpointManager.Options.DEFAULTS).save(model(1)));
    assertTrue(e.getMessage().startsWith("cannot list the checkpoint directory " + sub)
        || e.getMessage().startsWith("could not save checkpoint " + new Path(sub, "ckpt-1")), e.getMessage());
  }

  /**
   * A chief of attempt 1 whose host was cut off, healed after attempt 2's chief has saved: its late
   * save and its late open are refused, and attempt 2's checkpoints stay as they were.
   */
  @ParameterizedTest
  @MethodSource("fileSystems")
  void aChiefOfAnEndedAttemptCannotOverwriteOrDeleteWhatALaterAttemptSaved(String kind) throws Exception {
    Path dir = freshDir(kind);
    FileSystem fs = fsOf(kind, dir);
    WritePolicy chief = new WritePolicy(true, 0);
    CheckpointManager.Options keepOne = new CheckpointManager.Options(OptionalInt.of(1), Optional.empty(), "ckpt");
    try (CheckpointManager stale = new CheckpointManager(fs, dir, chief.forAttempt("job-1", 0), keepOne)) {
      stale.save(model(1), 1);
      try (CheckpointManager current = new CheckpointManager(fs, dir, chief.forAttempt("job-1", 1), keepOne)) {
        current.save(model(2), 2);
      }
      StaleWriterException refused = assertThrows(StaleWriterException.class, () -> stale.save(model(3), 3));
      assertEquals("attempt 1's chief may not write in " + fs.makeQualified(dir) + ": attempt 2 of this job has "
          + "written there since (.muster-writer); this task belongs to an attempt that has ended, and should exit",
          refused.getMessage());
    }
    assertEquals(List.of(".muster-writer", "checkpoint", "ckpt-2.data-00000-of-00001", "ckpt-2.index"), names(fs, dir));
    assertEquals(2L, BundleReader.open(fs, new Path(dir, "ckpt-2")).readAll().get("step").longs()[0]);
    assertThrows(StaleWriterException.class, () -> new CheckpointManager(fs, dir, chief.forAttempt("job-1", 0), keepOne),
        "a stale chief that opens the directory late is refused before it deletes anything");
    assertEquals(List.of(".muster-writer", "checkpoint", "ckpt-2.data-00000-of-00001", "ckpt-2.index"), names(fs, dir));

    // The next run of the job (attempts numbered from 0 again) takes the directory over and resumes.
    try (CheckpointManager next = new CheckpointManager(fs, dir, chief.forAttempt("job-2", 0), keepOne)) {
      assertEquals(new Path(fs.makeQualified(dir), "ckpt-3"), next.save(model(3)));
    }
  }
}
