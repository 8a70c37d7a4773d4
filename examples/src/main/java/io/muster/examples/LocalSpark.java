package io.muster.examples;

import java.util.function.ToIntFunction;
import org.apache.spark.sql.SparkSession;

/**
 * The Spark session of a command's main: Spark in this JVM with one core per task (unless under
 * spark-submit, which sets {@code spark.master}), made only when the command asks for it (after
 * its arguments are checked), and stopped when the command ends.
 */
final class LocalSpark implements AutoCloseable {
  private final String app;
  private SparkSession session;

  LocalSpark(String app) {
    this.app = app;
  }

  /** The session for a run needing {@code cores.applyAsInt(settings)} task slots; the same one every time. */
  <T> java.util.function.Function<T, SparkSession> sessions(ToIntFunction<T> cores) {
    return settings -> {
      if (session == null) {
        SparkSession.Builder builder = SparkSession.builder().appName(app);
        if (System.getProperty("spark.master") == null) {
          builder.master("local[" + cores.applyAsInt(settings) + "]").config("spark.ui.enabled", "false")
              .config("spark.driver.host", "127.0.0.1").config("spark.driver.bindAddress", "127.0.0.1")
              .config("spark.barrier.sync.timeout", "300s");
        }
        session = builder.getOrCreate();
      }
      return session;
    };
  }

  @Override
  public void close() {
    if (session != null) {
      session.stop();
    }
  }
}
