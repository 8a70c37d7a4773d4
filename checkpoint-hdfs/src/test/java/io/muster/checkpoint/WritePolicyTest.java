package io.muster.checkpoint;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.muster.cluster.ClusterSpec;
import io.muster.cluster.TaskId;
import java.util.List;
import java.util.Map;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** The cases of TensorFlow's distributed_file_utils_test.py, with a worker whose task id is 3. */
class WritePolicyTest {

  @TempDir
  java.nio.file.Path tmp;

  private static final WritePolicy WORKER_3 = new WritePolicy(false, 3);

  @Test
  void nonChiefWritesToWorkerTempDirAndDeletesIt() throws Exception {
    FileSystem fs = FileSystem.getLocal(new Configuration()).getRawFileSystem();
    Path d = new Path(tmp.toUri().toString());
    assertEquals(new Path(d, "workertemp_3"), WORKER_3.writeDir(fs, d));
    assertEquals(new Path(new Path(d, "workertemp_3"), "foo.bar"), WORKER_3.writeFile(fs, new Path(d, "foo.bar")));
    fs.create(new Path(new Path(d, "workertemp_3"), "foo.bar")).close();
    for (int i = 0; i < 3; i++) {
      WORKER_3.removeTempDir(fs, d);
      WORKER_3.removeTempDir(fs, new Path(d, "workertemp_3"));
    }
    assertFalse(fs.exists(new Path(d, "workertemp_3")));
  }

  @Test
  void chiefWritesInPlaceAndKeepsItsFiles() throws Exception {
    FileSystem fs = FileSystem.getLocal(new Configuration()).getRawFileSystem();
    Path d = new Path(tmp.toUri().toString());
    WritePolicy chief = new WritePolicy(true, 0);
    assertEquals(d, chief.writeDir(fs, d));
    fs.create(chief.writeFile(fs, new Path(d, "foo.bar"))).close();
    chief.removeTempDir(fs, d);
    assertTrue(fs.exists(new Path(d, "foo.bar")));
  }

  @Test
  void rolesFollowTheChiefRule() {
    ClusterSpec withChief = ClusterSpec.of(Map.of("chief", List.of("c:1"), "worker", List.of("w:1", "w:2")));
    assertTrue(WritePolicy.of(withChief, new TaskId("chief", 0)).chief());
    assertFalse(WritePolicy.of(withChief, new TaskId("worker", 0)).chief());
    ClusterSpec workers = ClusterSpec.of(Map.of("worker", List.of("w:1", "w:2")));
    assertTrue(WritePolicy.of(workers, new TaskId("worker", 0)).chief());
    assertEquals(new WritePolicy(false, 1), WritePolicy.of(workers, new TaskId("worker", 1)));
    ClusterSpec alone = ClusterSpec.of(Map.of("worker", List.of("w:1")));
    assertTrue(WritePolicy.of(alone, new TaskId("worker", 0)).chief());
  }

  @Test
  void aWorkersTempDirIsItsOwnWriteDirAndIsRemovedItself() throws Exception {
    FileSystem fs = FileSystem.getLocal(new Configuration()).getRawFileSystem();
    Path temp = new Path(new Path(tmp.toUri().toString()), "workertemp_3");
    assertEquals(temp, WORKER_3.writeDir(fs, temp), "not nested in itself");
    fs.create(new Path(temp, "foo.bar")).close();
    WORKER_3.removeTempDir(fs, temp);
    assertFalse(fs.exists(temp));
  }

  @Test
  void aWorkerOfAnEarlierAttemptDeletesItsOwnTempDirNotTheNextAttempts() throws Exception {
    FileSystem fs = FileSystem.getLocal(new Configuration()).getRawFileSystem();
    Path d = new Path(tmp.toUri().toString());
    WritePolicy first = WORKER_3.forAttempt("run-1", 0);
    WritePolicy second = WORKER_3.forAttempt("run-1", 1);
    assertEquals(new Path(d, "workertemp_3-attempt1"), first.writeDir(fs, d));
    Path next = second.writeFile(fs, new Path(d, "ckpt-7.index"));
    assertEquals(new Path(new Path(d, "workertemp_3-attempt2"), "ckpt-7.index"), next);
    fs.create(next).close();
    first.removeTempDir(fs, d); // the cut-off task of attempt 1, healed while attempt 2 saves
    assertTrue(fs.exists(next), "attempt 2's temp file is its own");
    assertFalse(fs.exists(new Path(d, "workertemp_3-attempt1")));
    second.removeTempDir(fs, d);
    assertFalse(fs.exists(new Path(d, "workertemp_3-attempt2")));
  }

  @Test
  void theChiefDeletesNothingEvenInADirectoryNamedLikeATempDir() throws Exception {
    FileSystem fs = FileSystem.getLocal(new Configuration()).getRawFileSystem();
    Path named = new Path(new Path(tmp.toUri().toString()), "workertemp_0");
    fs.create(new Path(named, "ckpt-1.index")).close();
    fs.create(new Path(new Path(named, "workertemp_0"), "kept")).close();
    WritePolicy.SINGLE_WORKER.removeTempDir(fs, named);
    assertTrue(fs.exists(new Path(named, "ckpt-1.index")));
    assertTrue(fs.exists(new Path(new Path(named, "workertemp_0"), "kept")));
  }
}
