package io.muster.checkpoint;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.File;
import java.io.IOException;
import java.io.RandomAccessFile;
import java.security.PrivilegedExceptionAction;
import java.util.LinkedHashMap;
import java.util.Map;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.hdfs.DFSTestUtil;
import org.apache.hadoop.hdfs.protocol.ExtendedBlock;
import org.apache.hadoop.security.UserGroupInformation;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * The checkpoint client: its closes poll the namenode soon, it is one per namenode and user, and
 * it reads without HDFS's checksums, relying on each tensor's CRC32C, so a corrupt replica must
 * still be read around and a tensor corrupt in every replica must be an error that names it.
 */
class CheckpointClientTest {
  private static MiniDfs hdfs;
  private static FileSystem fs;

  @BeforeAll
  static void startHdfs() throws IOException {
    hdfs = new MiniDfs("client", 2);
    fs = hdfs.fileSystem();
  }

  @AfterAll
  static void stopHdfs() {
    hdfs.close();
  }

  /** A checkpoint of one 1 MiB tensor "w" (one block, two replicas) and a scalar. */
  private static Path saveOneTensor(String dir, float[] values) throws IOException {
    CheckpointManager manager = new CheckpointManager(fs, new Path("/" + dir), WritePolicy.SINGLE_WORKER,
        CheckpointManager.Options.DEFAULTS);
    Map<String, Tensor> tensors = new LinkedHashMap<>();
    tensors.put("w", Tensor.ofFloats(new long[] {values.length}, values));
    tensors.put("step", Tensor.scalar(7L));
    return manager.save(tensors);
  }

  private static float[] values() {
    float[] values = new float[1 << 18];
    for (int i = 0; i < values.length; i++) {
      values[i] = i * 0.25f;
    }
    return values;
  }

  /** Flips one byte of the tensor "w" in the replica on the given datanodes. */
  private static void corrupt(Path prefix, int... dataNodes) throws IOException {
    Path data = Bundle.dataFile(prefix, 0, 1);
    ExtendedBlock block = DFSTestUtil.getFirstBlock(fs, data);
    long offset = BundleReader.open(fs, prefix).entries().get("w").getOffset() + 4097;
    for (int dn : dataNodes) {
      File replica = hdfs.cluster().getBlockFile(dn, block);
      try (RandomAccessFile file = new RandomAccessFile(replica, "rw")) {
        file.seek(offset);
        int b = file.read();
        file.seek(offset);
        file.write(b ^ 0x40);
      }
    }
  }

  @Test
  void aCorruptReplicaIsReadAroundWithHdfsChecksums() throws Exception {
    float[] values = values();
    Path prefix = saveOneTensor("one-bad-replica", values);
    corrupt(prefix, 0);
    CheckpointManager manager = new CheckpointManager(fs, prefix.getParent(), WritePolicy.SINGLE_WORKER,
        CheckpointManager.Options.DEFAULTS);
    // Either replica may be read first, so restore until the corrupt one has been read around: the
    // namenode hears of a corrupt replica only from a read with HDFS's checksums that met it, and
    // only the read-around path reads with them. Every restore must give the saved values.
    long corruptBefore = corruptReplicas();
    int restores = 0;
    while (corruptReplicas() == corruptBefore) {
      assertTrue(restores < 200, "the corrupt replica was not read around in " + restores + " restores");
      assertArrayEquals(values, manager.restore(prefix).get("w").floats(), "restore " + restores);
      float[] into = new float[values.length];
      manager.restoreInto(prefix, Map.of("w", into));
      assertArrayEquals(values, into, "restoreInto " + restores);
      restores++;
    }
    assertArrayEquals(values, manager.restore(prefix).get("w").floats(), "after the namenode knows the bad replica");
  }

  /** Blocks with at least one replica a client has reported corrupt to the namenode. */
  private static long corruptReplicas() {
    return hdfs.cluster().getNamesystem().getCorruptReplicaBlocks();
  }

  @Test
  void aTensorCorruptInEveryReplicaIsAnErrorNamingIt() throws Exception {
    Path prefix = saveOneTensor("all-bad", values());
    corrupt(prefix, 0, 1);
    CheckpointManager manager = new CheckpointManager(fs, prefix.getParent(), WritePolicy.SINGLE_WORKER,
        CheckpointManager.Options.DEFAULTS);
    IOException restore = assertThrows(IOException.class, () -> manager.restore(prefix));
    assertTrue(restore.getMessage().startsWith("Checksum does not match for w in " + Bundle.dataFile(prefix, 0, 1)),
        restore.getMessage());
    assertTrue(restore.getMessage().contains("; read again with HDFS's checksums: "), restore.getMessage());
    IOException into = assertThrows(IOException.class,
        () -> manager.restoreInto(prefix, Map.of("w", new float[1 << 18])));
    assertTrue(into.getMessage().contains("the restored array holds partial values; read again with HDFS's checksums"),
        into.getMessage());
    // the scalar beside it is intact and still restores
    long[] step = new long[1];
    manager.restoreInto(prefix, Map.of("step", step));
    assertEquals(7L, step[0]);
  }

  @Test
  void closesPollTheNamenodeFromTwoMillisecondsWithAtLeastTheConfiguredPatience() throws Exception {
    Configuration conf = CheckpointClient.of(fs).getConf();
    assertEquals(2, conf.getInt("dfs.client.block.write.locateFollowingBlock.initial.delay.ms", -1));
    // the default 400 ms doubled 5 times waits 12.4 s in all; 2 ms doubled 13 times, 16.4 s
    assertEquals(13, conf.getInt("dfs.client.block.write.locateFollowingBlock.retries", -1));
  }

  @Test
  void oneClientPerNamenodeAndUserWhichFileSystemCloseAllLeavesOpen() throws Exception {
    FileSystem client = CheckpointClient.of(fs);
    assertSame(client, CheckpointClient.of(fs));
    FileSystem local = FileSystem.getLocal(new Configuration()).getRawFileSystem();
    assertSame(local, CheckpointClient.of(local));
    // a client made for another user is used as given outside that user's doAs, and gets a
    // checkpoint client of its own inside it
    UserGroupInformation alice = UserGroupInformation.createRemoteUser("alice");
    FileSystem alices = alice.doAs((PrivilegedExceptionAction<FileSystem>) () -> FileSystem.newInstance(fs.getUri(),
        fs.getConf()));
    assertSame(alices, CheckpointClient.of(alices));
    FileSystem alicesClient = alice.doAs((PrivilegedExceptionAction<FileSystem>) () -> CheckpointClient.of(alices));
    assertTrue(alicesClient != alices && alicesClient != client, "alice's own checkpoint client");
    alices.close();
    // Hadoop's FileSystem.closeAll() closes the caller's client, not the checkpoint client
    FileSystem.closeAll();
    fs = hdfs.fileSystem();
    float[] values = values();
    Path prefix = saveOneTensor("after-close-all", values);
    assertArrayEquals(values, new CheckpointManager(fs, prefix.getParent(), WritePolicy.SINGLE_WORKER,
        CheckpointManager.Options.DEFAULTS).restore(prefix).get("w").floats());
  }
}
