package io.muster.examples;

import java.util.function.ToIntFunction;
import org.apache.logging.log4j.LogManager;
import org.apache.logging.log4j.core.LoggerContext;
import org.apache.logging.log4j.core.config.DefaultConfiguration;
import org.apache.spark.sql.SparkSession;

/**
 * The Spark session of a command's main: Spark in this JVM with one core per task (unless under
 * spark-submit, which sets {@code spark.master}), made only when the command asks for it (after
 * its arguments are checked), and stopped when the command ends.
 */
final class LocalSpark implements AutoCloseable {
  /**
   * Spark's default (true) has its cleaner thread wait for every executor to drop a broadcast or RDD
   * the driver no longer uses; an executor on a host cut off never answers, the wait lasts
   * {@code spark.rpc.askTimeout} (120 s), and stopping the SparkContext waits for that thread: a job
   * that had finished held its driver that long after a host was lost. Unless the user sets it.
   */
  static final String CLEANER_BLOCKING = "spark.cleaner.referenceTracking.blocking";
  private final String app;
  private SparkSession session;

  LocalSpark(String app) {
    this.app = app;
    quietUnderSparkSubmit();
  }

  /**
   * Under spark-submit, the console as quiet as {@code ./muster demo}'s (this jar's log4j2.xml) instead of
   * Spark's default configuration, which shows every INFO line of Spark's; a configuration of the
   * user's own (Spark's {@code conf/log4j2.properties}, {@code -Dlog4j2.configurationFile}) is kept.
   */
  private static void quietUnderSparkSubmit() {
    // Spark's classes log through the context of Spark's class loader; this jar may be in a child of it.
    if (ClusterPaths.master().isEmpty()
        || !(LogManager.getContext(SparkSession.class.getClassLoader(), false) instanceof LoggerContext context)) {
      return;
    }
    java.net.URI location = context.getConfigLocation();
    java.net.URL ours = LocalSpark.class.getResource("/log4j2.xml");
    // Log4j's own default (no file found; Spark loads its defaults on its first log line) or Spark's defaults
    boolean sparksDefault = context.getConfiguration() instanceof DefaultConfiguration
        || location != null && location.toString().endsWith("/log4j2-defaults.properties");
    if (sparksDefault && ours != null) {
      try {
        context.setConfigLocation(ours.toURI());
      } catch (java.net.URISyntaxException e) {
        throw new IllegalStateException(e);
      }
      forgetSparksDefault();
    }
  }

  /**
   * Spark remembers that it loaded its default configuration and loads it again when the
   * SparkContext starts (Logging.uninitialize, then initializeLogging); clearing that mark keeps ours.
   * The mark is Scala-private: where a Spark version lacks it, Spark's INFO lines come back, nothing fails.
   */
  private static void forgetSparksDefault() {
    try {
      Class<?> logging = Class.forName("org.apache.spark.internal.Logging$");
      Object module = logging.getField("MODULE$").get(null);
      logging.getMethod("org$apache$spark$internal$Logging$$defaultSparkLog4jConfig_$eq", boolean.class)
          .invoke(module, false);
    } catch (ReflectiveOperationException | RuntimeException e) {
      LogManager.getLogger(LocalSpark.class).debug("cannot keep Spark from loading its default logging again", e);
    }
  }

  /** The session for a run needing {@code cores.applyAsInt(settings)} task slots; the same one every time. */
  <T> java.util.function.Function<T, SparkSession> sessions(ToIntFunction<T> cores) {
    return settings -> {
      if (session == null) {
        SparkSession.Builder builder = SparkSession.builder().appName(app);
        if (ClusterPaths.master().isEmpty()) {
          builder.master("local[" + cores.applyAsInt(settings) + "]").config("spark.ui.enabled", "false")
              .config("spark.driver.host", "127.0.0.1").config("spark.driver.bindAddress", "127.0.0.1")
              .config("spark.barrier.sync.timeout", "300s");
        }
        if (System.getProperty(CLEANER_BLOCKING) == null) { // spark-submit's --conf are system properties here
          builder.config(CLEANER_BLOCKING, "false");
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
