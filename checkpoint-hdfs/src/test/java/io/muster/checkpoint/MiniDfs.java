package io.muster.checkpoint;

import java.io.File;
import java.io.IOException;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.hdfs.MiniDFSCluster;

/** An HDFS on 127.0.0.1 for a test class, one datanode unless asked; its files live under target/. */
final class MiniDfs implements AutoCloseable {
  private final MiniDFSCluster cluster;

  MiniDfs(String name) throws IOException {
    this(name, 1);
  }

  MiniDfs(String name, int dataNodes) throws IOException {
    this(name, dataNodes, conf -> {});
  }

  /** With {@code settings} applied to the cluster's configuration (and so to its clients'). */
  MiniDfs(String name, int dataNodes, java.util.function.Consumer<Configuration> settings) throws IOException {
    Configuration conf = new Configuration();
    conf.set(MiniDFSCluster.HDFS_MINIDFS_BASEDIR, new File("target/minidfs-" + name).getAbsolutePath());
    conf.set("dfs.namenode.http-address", "127.0.0.1:0");
    conf.set("dfs.datanode.address", "127.0.0.1:0");
    conf.set("dfs.datanode.http.address", "127.0.0.1:0");
    conf.set("dfs.datanode.ipc.address", "127.0.0.1:0");
    // a client that finds no good replica tries again after ~10 ms, not ~3 s
    conf.setInt("dfs.client.retry.window.base", 10);
    settings.accept(conf);
    cluster = new MiniDFSCluster.Builder(conf).numDataNodes(dataNodes).build();
    cluster.waitActive();
  }

  MiniDFSCluster cluster() {
    return cluster;
  }

  FileSystem fileSystem() throws IOException {
    return cluster.getFileSystem();
  }

  @Override
  public void close() {
    cluster.shutdown();
  }
}
