package io.muster.checkpoint;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.hdfs.DistributedFileSystem;
import org.apache.hadoop.hdfs.protocol.HdfsConstants;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * A save on HDFS that runs out of its directory's space quota while the data bytes are being
 * written: 1 MiB blocks, one replica, a 4 MiB quota, and a checkpoint of 8 MiB, so the namenode
 * refuses a block after several megabytes of the data file are written.
 */
class SpaceQuotaSaveTest {
  private static final long MIB = 1 << 20;
  private static MiniDfs hdfs;

  @BeforeAll
  static void start() throws IOException {
    hdfs = new MiniDfs("quota", 1, conf -> {
      conf.setLong("dfs.blocksize", MIB);
      conf.setInt("dfs.replication", 1);
    });
  }

  @AfterAll
  static void stop() {
    hdfs.close();
  }

  private static Map<String, Tensor> model(float value, int floats) {
    float[] w = new float[floats];
    Arrays.fill(w, value);
    return Map.of("w", Tensor.ofFloats(new long[] {floats}, w), "step", Tensor.scalar((long) value));
  }

  private static List<String> names(DistributedFileSystem fs, Path dir) throws IOException {
    return Arrays.stream(fs.listStatus(dir)).map(FileStatus::getPath).map(Path::getName).sorted().toList();
  }

  @Test
  void aSaveOutOfSpaceMidWriteLeavesTheLatestCompleteAndNoTemporaryFile() throws Exception {
    DistributedFileSystem fs = (DistributedFileSystem) hdfs.fileSystem();
    Path dir = fs.makeQualified(new Path("/quota"));
    fs.mkdirs(dir);
    fs.setQuota(dir, HdfsConstants.QUOTA_DONT_SET, 4 * MIB);
    CheckpointManager manager = new CheckpointManager(fs, dir, WritePolicy.SINGLE_WORKER, CheckpointManager.Options.DEFAULTS);
    Path first = manager.save(model(1, 1024));

    IOException e = assertThrows(IOException.class, () -> manager.save(model(2, (int) (8 * MIB / 4))));
    assertTrue(e.getMessage().startsWith("could not save checkpoint " + new Path(dir, "ckpt-2")), e.getMessage());
    assertTrue(e.getMessage().contains("DiskSpace quota of /quota is exceeded"), e.getMessage());
    assertTrue(e.getMessage().endsWith("the latest complete checkpoint is still " + first), e.getMessage());
    List<String> onlyFirst = List.of("checkpoint", "ckpt-1.data-00000-of-00001", "ckpt-1.index");
    assertEquals(onlyFirst, names(fs, dir), "the failed save's files are deleted");
    assertEquals(Optional.of(first), manager.latest());
    assertArrayEquals(model(1, 1024).get("w").floats(), manager.restore(first).get("w").floats());

    // the next manager (a restarted chief) finds the same, and saves once there is room
    CheckpointManager next = new CheckpointManager(fs, dir, WritePolicy.SINGLE_WORKER, CheckpointManager.Options.DEFAULTS);
    assertEquals(onlyFirst, names(fs, dir));
    assertEquals(Optional.of(first), next.latest());
    fs.setQuota(dir, HdfsConstants.QUOTA_DONT_SET, HdfsConstants.QUOTA_RESET);
    Path saved = next.save(model(2, (int) (8 * MIB / 4)));
    assertEquals(Optional.of(saved), next.latest());
    assertEquals(2f, next.restore(saved).get("w").floats()[12345]);
  }
}
