package io.muster.yarn;

import java.net.URI;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import org.apache.logging.log4j.Level;
import org.apache.logging.log4j.core.Appender;
import org.apache.logging.log4j.core.LoggerContext;
import org.apache.logging.log4j.core.appender.ConsoleAppender;
import org.apache.logging.log4j.core.config.AbstractConfiguration;
import org.apache.logging.log4j.core.config.Configuration;
import org.apache.logging.log4j.core.config.ConfigurationFactory;
import org.apache.logging.log4j.core.config.ConfigurationSource;
import org.apache.logging.log4j.core.config.LoggerConfig;
import org.apache.logging.log4j.core.layout.PatternLayout;

/**
 * The Log4j 2 configuration of the master's and the executors' JVMs, built in code: what the
 * command line's {@code log4j2.xml} says (the same lines on stderr, {@code MUSTER_LOG_LEVEL} for
 * Muster's level and stack traces only at debug or trace, {@code MUSTER_HADOOP_LOG_LEVEL} for
 * Hadoop's, off by default), without finding, parsing and reflecting a configuration file. Every
 * container pays Log4j's start on the job's path, and that was about a third of it; with
 * {@link #JVM_FLAGS}' other two (one logger context, as a container has one class loader; no
 * Log4j MBeans) an executor starts on about 0.1 s less CPU.
 */
public final class ContainerLogging extends ConfigurationFactory {

  /** The container JVM's flags that put this configuration in place. */
  static final List<String> JVM_FLAGS = List.of("-Dlog4j2.configurationFactory=" + ContainerLogging.class.getName(),
      "-Dlog4j2.contextSelector=org.apache.logging.log4j.core.selector.BasicContextSelector",
      "-Dlog4j2.disableJmx=true");
  /**
   * The environment variables that set the containers' levels. The client passes those of its
   * environment to the master, the master its own to the executors: a container gets only the
   * environment its launch context names (and YARN's few), not its NodeManager's, so this is how
   * {@code MUSTER_LOG_LEVEL=debug muster submit ...} puts a job's containers at debug.
   */
  static final List<String> LEVELS = List.of("MUSTER_LOG_LEVEL", "MUSTER_HADOOP_LOG_LEVEL");
  private static final String PATTERN = "%d{HH:mm:ss.SSS} %-5level %msg%n";
  private static final Set<String> VERBOSE = Set.of("debug", "trace");

  /** Of {@code environment}, the variables that set the containers' levels ({@link #LEVELS}). */
  static Map<String, String> levels(Map<String, String> environment) {
    Map<String, String> levels = new HashMap<>();
    for (String name : LEVELS) {
      String level = environment.get(name);
      if (level != null && !level.isBlank()) {
        levels.put(name, level);
      }
    }
    return levels;
  }

  @Override
  protected String[] getSupportedTypes() {
    return new String[] {"*"};
  }

  @Override
  public Configuration getConfiguration(LoggerContext context, ConfigurationSource source) {
    return new Containers(context, System.getenv("MUSTER_LOG_LEVEL"), System.getenv("MUSTER_HADOOP_LOG_LEVEL"));
  }

  @Override
  public Configuration getConfiguration(LoggerContext context, String name, URI location) {
    return getConfiguration(context, ConfigurationSource.NULL_SOURCE);
  }

  /** Muster's loggers at {@code musterLevel} (info when unset), Hadoop's at {@code hadoopLevel} (off when unset). */
  static final class Containers extends AbstractConfiguration {
    private final String musterLevel;
    private final String hadoopLevel;

    Containers(LoggerContext context, String musterLevel, String hadoopLevel) {
      super(context, ConfigurationSource.NULL_SOURCE);
      this.musterLevel = musterLevel == null ? "info" : musterLevel;
      this.hadoopLevel = hadoopLevel == null ? "off" : hadoopLevel;
      setName("muster-containers");
    }

    @Override
    protected void doConfigure() {
      PatternLayout layout = PatternLayout.newBuilder().withConfiguration(this).withPattern(PATTERN)
          .withAlwaysWriteExceptions(VERBOSE.contains(musterLevel.toLowerCase(Locale.ROOT))).build();
      Appender err = ConsoleAppender.newBuilder().setName("err").setTarget(ConsoleAppender.Target.SYSTEM_ERR)
          .setLayout(layout).setConfiguration(this).build();
      addAppender(err);
      LoggerConfig root = getRootLogger();
      root.setLevel(Level.WARN);
      root.addAppender(err, null, null);
      logger("io.muster", Level.toLevel(musterLevel, Level.INFO));
      logger("org.apache.hadoop", Level.toLevel(hadoopLevel, Level.OFF));
      logger("org.apache.hadoop.util.NativeCodeLoader", Level.ERROR);
    }

    private void logger(String name, Level level) {
      addLogger(name, new LoggerConfig(name, level, true));
    }
  }
}
