package io.muster.checkpoint;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.URI;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.hdfs.DistributedFileSystem;
import org.apache.hadoop.security.UserGroupInformation;

/**
 * The HDFS client a checkpoint's files are written and its data files read through: a second
 * client on the caller's namenode and configuration, with two differences.
 *
 * <ul>
 *   <li>Closing a file polls the namenode from {@value #COMPLETE_POLL_MS} ms on instead of
 *       {@code dfs.client.block.write.locateFollowingBlock.initial.delay.ms} (400 ms by default).
 *       The namenode completes a file only once the datanode has reported its last block, and a
 *       client's first ask usually beats that report by a few milliseconds; the default client
 *       then sleeps 400 ms, so each file of a save could cost 400 ms whatever its size (asking for
 *       a file's next block waits on the same reports with the same back-off). The polls double,
 *       and more of them keep the client's total patience at least the configured one.
 *   <li>Reads skip HDFS's per-chunk checksums: every tensor carries its own CRC32C from the
 *       writer's memory to the reader's, which {@link BundleReader} checks, so verifying both
 *       would check every byte twice. A tensor whose CRC does not match is read again through the
 *       caller's own client, which verifies HDFS's checksums and moves to another replica when one
 *       is corrupt (HBase reads its HFiles the same way).
 * </ul>
 *
 * <p>Other file systems, and a client made for another user than the current one, are used as
 * given. The client is made once per namenode and user and
 * lives as long as the JVM, like the clients in Hadoop's own cache, but outside that cache so that
 * {@code FileSystem.closeAll()} does not close it under a save.
 */
public final class CheckpointClient {
  static final int COMPLETE_POLL_MS = 2;
  private static final String POLL_KEY = "dfs.client.block.write.locateFollowingBlock.initial.delay.ms";
  private static final String RETRIES_KEY = "dfs.client.block.write.locateFollowingBlock.retries";

  private record Key(URI namenode, UserGroupInformation user) {}

  private static final Map<Key, FileSystem> CLIENTS = new ConcurrentHashMap<>();

  private CheckpointClient() {}

  /** The client for {@code fs}'s checkpoint files: {@code fs} itself unless it is HDFS. */
  public static FileSystem of(FileSystem fs) throws IOException {
    if (fs.getClass() != DistributedFileSystem.class) {
      return fs;
    }
    UserGroupInformation user = UserGroupInformation.getCurrentUser();
    if (!fs.getHomeDirectory().getName().equals(user.getShortUserName())) {
      // made inside another user's doAs: a client made here would act as the wrong user
      return fs;
    }
    Key key = new Key(fs.getUri(), user);
    try {
      return CLIENTS.computeIfAbsent(key, k -> {
        try {
          return open(k.namenode(), fs.getConf());
        } catch (IOException e) {
          throw new UncheckedIOException(e);
        }
      });
    } catch (UncheckedIOException e) {
      throw e.getCause();
    }
  }

  private static FileSystem open(URI namenode, Configuration given) throws IOException {
    Configuration conf = new Configuration(given);
    int poll = conf.getInt(POLL_KEY, 400);
    if (poll > COMPLETE_POLL_MS) {
      // the default's total patience is poll * (2^retries - 1); doubling from a smaller poll
      // reaches it with this many more retries
      int more = 64 - Long.numberOfLeadingZeros((poll + COMPLETE_POLL_MS - 1) / COMPLETE_POLL_MS - 1);
      conf.setInt(POLL_KEY, COMPLETE_POLL_MS);
      conf.setInt(RETRIES_KEY, conf.getInt(RETRIES_KEY, 5) + more);
    }
    DistributedFileSystem client = new DistributedFileSystem();
    client.initialize(namenode, conf);
    client.setVerifyChecksum(false);
    return client;
  }
}
