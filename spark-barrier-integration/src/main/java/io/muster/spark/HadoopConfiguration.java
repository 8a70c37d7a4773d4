package io.muster.spark;

import java.io.IOException;
import java.io.ObjectInputStream;
import java.io.ObjectOutputStream;
import java.io.Serializable;
import org.apache.hadoop.conf.Configuration;

/**
 * The driver's Hadoop configuration (Spark's, with every {@code spark.hadoop.*} setting), carried
 * to the executors in the task, so that checkpoints, summaries and backups reach the same file
 * systems the driver does: an HA namenode, a custom {@code fs.defaultFS}, S3A credentials. An
 * executor's {@code new Configuration()} sees only the files on its own class path.
 */
final class HadoopConfiguration implements Serializable {
  private static final long serialVersionUID = 1L;

  private transient Configuration conf;

  HadoopConfiguration(Configuration conf) {
    this.conf = new Configuration(conf);
  }

  Configuration get() {
    return conf;
  }

  private void writeObject(ObjectOutputStream out) throws IOException {
    out.defaultWriteObject();
    conf.write(out);
  }

  private void readObject(ObjectInputStream in) throws IOException, ClassNotFoundException {
    in.defaultReadObject();
    conf = new Configuration(false);
    conf.readFields(in);
  }
}
