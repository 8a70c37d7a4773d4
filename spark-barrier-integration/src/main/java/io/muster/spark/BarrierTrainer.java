package io.muster.spark;

import io.muster.collective.CommunicationOptions;
import io.muster.coordination.CoordinationOptions;
import io.muster.rpc.JobToken;
import java.io.Serializable;
import java.security.SecureRandom;
import java.time.Duration;
import java.util.HexFormat;
import java.util.List;
import java.util.Optional;
import java.util.function.Consumer;
import java.util.function.IntFunction;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.apache.spark.SparkConf;
import org.apache.spark.api.java.JavaRDD;
import org.apache.spark.api.java.JavaSparkContext;
import org.apache.spark.rdd.RDD;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.types.StructType;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import scala.reflect.ClassTag;
import scala.reflect.ClassTag$;

/**
 * Gang-scheduled training from Spark: the data is repartitioned into {@code numWorkers} shards and
 * a barrier stage of {@code numWorkers} tasks runs the train function on them, together, as
 * workers 0..n-1 of one job ({@link TrainContext}); the chief's result is returned. Or each task
 * runs an external command ({@link #run(Dataset, ExternalCommand)}) with its {@code TF_CONFIG} and
 * its shard as TFRecord files.
 *
 * <p>{@link Builder#build()} checks every option; {@link #fit} and {@code run} check the Spark application
 * before any task starts (dynamic allocation off, enough task slots for the whole gang at once)
 * and fails with the setting to change instead of letting Spark wait for slots. Each task binds its
 * server before publishing its address (no port race); a fresh job token is made per run. When a
 * task fails, every task of the gang fails with it (the coordination service sees to that) and
 * the whole gang is re-run, up to {@code maxAttempts} times, with {@link TrainContext#attempt()}
 * counting up; a train function using {@link TrainContext#backupAndRestore} resumes where the
 * last backup left it.
 */
public final class BarrierTrainer implements Serializable {

  private static final long serialVersionUID = 1L;
  private static final Logger log = LoggerFactory.getLogger(BarrierTrainer.class);
  /** Longer address-exchange waits than this are warned about (Spark's default is a year). */
  static final long MAX_BARRIER_SYNC_SECONDS = 3600;
  private static final Pattern LOCAL = Pattern.compile("local(?:\\[(\\d+|\\*)(?:,\\d+)?])?");
  private static final Pattern LOCAL_CLUSTER = Pattern.compile("local-cluster\\[(\\d+),\\s*(\\d+),\\s*\\d+]");

  private final int numWorkers;
  private final int maxAttempts;
  private final int gpusPerWorker;
  private final String host;
  private final transient CoordinationOptions coordination;
  private final transient CommunicationOptions communication;
  private final transient Consumer<CommandLine> commandLogs;

  private BarrierTrainer(Builder b) {
    this.numWorkers = b.numWorkers;
    this.maxAttempts = b.maxAttempts;
    this.gpusPerWorker = b.gpusPerWorker;
    this.host = b.host;
    this.coordination = b.coordination;
    this.communication = b.communication;
    this.commandLogs = b.commandLogs;
  }

  public static Builder builder() {
    return new Builder();
  }

  public int numWorkers() {
    return numWorkers;
  }

  /** Trains on a DataFrame's rows; see {@link #fit(JavaRDD, TrainFunction)}. */
  public <R extends Serializable> R fit(Dataset<Row> data, TrainFunction<Row, R> fn) {
    return fit(data.javaRDD(), fn);
  }

  /**
   * Runs the barrier stage and returns the chief's result.
   *
   * @throws IllegalStateException naming the Spark setting when the application cannot run a gang
   *     of {@code numWorkers} tasks
   */
  public <T, R extends Serializable> R fit(JavaRDD<T> data, TrainFunction<T, R> fn) {
    checkApplication(JavaSparkContext.fromSparkContext(data.context()).getConf(), numWorkers, gpusPerWorker);
    JavaRDD<T> shards = data.repartition(numWorkers);
    return withRetries(attempt -> runGang(shards, fn, attempt));
  }

  /**
   * Runs an external command on every task of the gang, without data (the command reads its own);
   * see {@link #run(Dataset, ExternalCommand)}.
   */
  public Optional<byte[]> run(SparkSession spark, ExternalCommand command) {
    JavaSparkContext jsc = JavaSparkContext.fromSparkContext(spark.sparkContext());
    checkApplication(jsc.getConf(), numWorkers, gpusPerWorker);
    JavaRDD<Row> none = jsc.parallelize(List.<Row>of(), numWorkers);
    return withRetries(attempt -> runCommandGang(none, null, command, attempt));
  }

  /**
   * Runs an external command on every task of the gang, each with its shard of the DataFrame as
   * TFRecord files of {@code tf.train.Example} ({@link CommandTask} lists what the command is
   * told). Its output is streamed to the driver's log (or to {@link Builder#commandLogs}), a failure
   * carries the last lines of the failed command's stderr, and the chief's result file, if it
   * leaves one, is returned.
   *
   * @throws IllegalArgumentException before any task starts when a column has no tf.train.Feature
   */
  public Optional<byte[]> run(Dataset<Row> data, ExternalCommand command) {
    JavaSparkContext jsc = JavaSparkContext.fromSparkContext(data.sparkSession().sparkContext());
    checkApplication(jsc.getConf(), numWorkers, gpusPerWorker);
    new RowExamples(data.schema()); // refuses unsupported columns here, on the driver
    JavaRDD<Row> shards = data.javaRDD().repartition(numWorkers);
    return withRetries(attempt -> runCommandGang(shards, data.schema(), command, attempt));
  }

  private <R> R withRetries(IntFunction<R> gang) {
    for (int attempt = 0; ; attempt++) {
      try {
        return gang.apply(attempt);
      } catch (Exception e) { // SparkException is checked in Java's eyes, though Scala does not declare it
        // Spark does not re-run a failed barrier result stage; the whole gang is re-run here, and
        // the training resumes from its BackupAndRestore backup.
        if (attempt + 1 >= maxAttempts) {
          throw new IllegalStateException("training failed on attempt " + (attempt + 1) + " of " + maxAttempts
              + ": " + withoutStackFrames(e.getMessage()), e);
        }
        log.warn("training attempt {} of {} failed; re-running the whole gang of {}: {}", attempt + 1, maxAttempts,
            numWorkers, e.toString());
      }
    }
  }

  private Optional<byte[]> runCommandGang(JavaRDD<Row> shards, StructType schema, ExternalCommand command,
      int attempt) {
    JobToken token = newToken();
    SparkConf conf = shards.context().getConf();
    String driverHost = conf.get("spark.driver.host", "127.0.0.1");
    Consumer<CommandLine> sink = commandLogs != null ? commandLogs : CommandLogs::toLog;
    try (CommandLogs.Receiver logs = CommandLogs.Receiver.start(conf.get("spark.driver.bindAddress", driverHost),
        driverHost, token, sink)) {
      CommandTask task = new CommandTask(command, schema, token, host, logs.address(), attempt, gpusPerWorker);
      ClassTag<byte[]> tag = ClassTag$.MODULE$.apply(byte[].class);
      List<byte[]> chief = new JavaRDD<>(shards.rdd().barrier().mapPartitions(task, false, tag), tag).collect();
      return chief.stream().findFirst();
    }
  }

  private <T, R extends Serializable> R runGang(JavaRDD<T> shards, TrainFunction<T, R> fn, int attempt) {
    BarrierTask<T, R> task = new BarrierTask<>(fn, newToken(), host, coordination, communication, attempt,
        gpusPerWorker);
    @SuppressWarnings("unchecked")
    ClassTag<R> tag = (ClassTag<R>) (ClassTag<?>) ClassTag$.MODULE$.apply(Serializable.class);
    RDD<R> results = shards.rdd().barrier().mapPartitions(task, false, tag);
    List<R> chief = new JavaRDD<>(results, tag).collect();
    if (chief.size() != 1) {
      throw new IllegalStateException("expected one result from the chief, got " + chief.size());
    }
    return chief.get(0);
  }

  /** Spark puts the failed task's stack trace into the job's message; the cause stays, its frames go. */
  static String withoutStackFrames(String message) {
    return message == null ? null : message.replaceAll("\\n\\s+at [^\\n]*|\\n\\s*\\.\\.\\. \\d+ more", "").strip();
  }

  /** A fresh secret per gang run: a task of an earlier attempt cannot join a later one. */
  private static JobToken newToken() {
    byte[] secret = new byte[16];
    new SecureRandom().nextBytes(secret);
    return JobToken.of(HexFormat.of().formatHex(secret));
  }

  /** The pre-flight checks, on the driver, before any task starts. */
  static void checkApplication(SparkConf conf, int numWorkers, int gpusPerWorker) {
    warnings(conf).forEach(log::warn);
    if (gpusPerWorker > 0) {
      double perTask = conf.getDouble("spark.task.resource.gpu.amount", 0);
      if (perTask < gpusPerWorker) {
        throw new IllegalStateException("gpusPerWorker " + gpusPerWorker + " needs spark.task.resource.gpu.amount >= "
            + gpusPerWorker + " (and GPUs on the executors with a discovery script), but it is "
            + (perTask == 0 ? "not set" : String.valueOf(perTask)));
      }
    }
    if (conf.getBoolean("spark.dynamicAllocation.enabled", false)) {
      throw new IllegalStateException("spark.dynamicAllocation.enabled is true, but a barrier stage needs its "
          + numWorkers + " tasks running at once on a fixed set of executors; set spark.dynamicAllocation.enabled=false");
    }
    int slots = taskSlots(conf);
    if (slots > 0 && numWorkers > slots) {
      throw new IllegalStateException("numWorkers " + numWorkers + " exceeds the " + slots + " task slots this "
          + "application can have at once (master " + conf.get("spark.master", "?") + ", spark.task.cpus "
          + conf.getInt("spark.task.cpus", 1) + "); lower numWorkers or give the application more executors or cores");
    }
  }

  /** Settings that do not stop a run but can make a failure wait far too long. */
  static List<String> warnings(SparkConf conf) {
    long syncTimeout = conf.getTimeAsSeconds("spark.barrier.sync.timeout", "365d");
    if (syncTimeout > MAX_BARRIER_SYNC_SECONDS) {
      return List.of("spark.barrier.sync.timeout is " + syncTimeout + " s: a task that never reaches the address "
          + "exchange (stuck writing its shard, say) would hold the whole gang that long; set it to the longest a "
          + "task may take to start, e.g. --conf spark.barrier.sync.timeout=600");
    }
    return List.of();
  }

  /** Task slots from the master and executor settings; 0 when they do not say (the check is then skipped). */
  static int taskSlots(SparkConf conf) {
    String master = conf.get("spark.master", "");
    int taskCpus = conf.getInt("spark.task.cpus", 1);
    Matcher local = LOCAL.matcher(master);
    if (local.matches()) {
      String n = local.group(1);
      int cores = n == null ? 1 : n.equals("*") ? Runtime.getRuntime().availableProcessors() : Integer.parseInt(n);
      return cores / taskCpus;
    }
    Matcher cluster = LOCAL_CLUSTER.matcher(master);
    if (cluster.matches()) {
      return Integer.parseInt(cluster.group(1)) * (Integer.parseInt(cluster.group(2)) / taskCpus);
    }
    if (conf.contains("spark.executor.instances") && conf.contains("spark.executor.cores")) {
      return conf.getInt("spark.executor.instances", 0) * (conf.getInt("spark.executor.cores", 1) / taskCpus);
    }
    log.warn("cannot tell how many task slots this application has (master {}); a gang larger than the "
        + "cluster will wait for slots", master);
    return 0;
  }

  /** Options with defaults that suit most jobs; {@link #build()} checks them. */
  public static final class Builder {
    private int numWorkers = 1;
    private int maxAttempts = 1;
    private int gpusPerWorker;
    private String host;
    private CoordinationOptions coordination = CoordinationOptions.DEFAULTS
        .withShutdownBarrierTimeout(Duration.ofMinutes(1));
    private CommunicationOptions communication = CommunicationOptions.DEFAULTS;
    private Consumer<CommandLine> commandLogs;

    private Builder() {}

    /**
     * Where the external commands' lines go on the driver; by default to the log as
     * {@code [worker 2] text} (logger {@code io.muster.spark.CommandLogs}, INFO).
     */
    public Builder commandLogs(Consumer<CommandLine> sink) {
      this.commandLogs = sink;
      return this;
    }

    public Builder numWorkers(int n) {
      this.numWorkers = n;
      return this;
    }

    /** How many times the whole gang runs before fit gives up (a failed task fails every task). */
    public Builder maxAttempts(int n) {
      this.maxAttempts = n;
      return this;
    }

    /** GPUs each worker needs; the train function gets their device ordinals ({@link TrainContext#gpus()}). */
    public Builder gpusPerWorker(int n) {
      this.gpusPerWorker = n;
      return this;
    }

    /** The host other executors reach a task at; by default the executor's own address. */
    public Builder host(String value) {
      this.host = value;
      return this;
    }

    public Builder coordination(CoordinationOptions value) {
      this.coordination = value;
      return this;
    }

    public Builder communication(CommunicationOptions value) {
      this.communication = value;
      return this;
    }

    public BarrierTrainer build() {
      if (numWorkers < 1) {
        throw new IllegalArgumentException("numWorkers must be >= 1, was " + numWorkers);
      }
      if (gpusPerWorker < 0) {
        throw new IllegalArgumentException("gpusPerWorker must be >= 0, was " + gpusPerWorker);
      }
      if (maxAttempts < 1) {
        throw new IllegalArgumentException("maxAttempts must be >= 1, was " + maxAttempts);
      }
      if (host != null && host.isBlank()) {
        throw new IllegalArgumentException("host must be a host name or address, was '" + host + "'");
      }
      if (coordination == null || communication == null) {
        throw new IllegalArgumentException("coordination and communication options must not be null");
      }
      if (communication.timeout().isPresent()) {
        throw new IllegalArgumentException("communication timeout is taken from the coordination heartbeat "
            + "timeout on Spark; leave CommunicationOptions.timeout empty");
      }
      return new BarrierTrainer(this);
    }
  }
}
