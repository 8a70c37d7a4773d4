package io.muster.yarn;

import java.io.File;
import java.nio.charset.StandardCharsets;
import java.util.stream.Collectors;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FSDataOutputStream;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.security.Credentials;
import org.apache.hadoop.security.UserGroupInformation;

/**
 * A YARN task's command that shows what its container was given to reach the cluster's HDFS: it
 * writes the kinds of the tokens in its credentials file, sorted and comma-separated, to
 * {@code MUSTER_OUTPUT_DIR/<type>-<index>} on HDFS, as whichever user its Hadoop client is (on a
 * Kerberos cluster it has no ticket, only those tokens). Its class path starts with the cluster's
 * configuration directory, as a node's does.
 */
public final class YarnTokensTask {
  private YarnTokensTask() {}

  public static void main(String[] args) throws Exception {
    Configuration conf = new Configuration();
    Credentials credentials = Credentials.readTokenStorageFile(
        new File(System.getenv(UserGroupInformation.HADOOP_TOKEN_FILE_LOCATION)), conf);
    String kinds = credentials.getAllTokens().stream().map(token -> token.getKind().toString()).sorted()
        .collect(Collectors.joining(","));
    Path out = new Path(System.getenv("MUSTER_OUTPUT_DIR"),
        System.getenv("MUSTER_TASK_TYPE") + "-" + System.getenv("MUSTER_TASK_INDEX"));
    try (FSDataOutputStream stream = out.getFileSystem(conf).create(out)) {
      stream.write(kinds.getBytes(StandardCharsets.UTF_8));
    }
    System.out.println("tokens: " + kinds + " (as " + UserGroupInformation.getCurrentUser() + ")");
  }
}
