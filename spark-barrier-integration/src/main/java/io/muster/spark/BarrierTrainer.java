package io.muster.spark;

import io.muster.cluster.TaskType;
import io.muster.collective.CommunicationOptions;
import io.muster.coordination.CoordinationOptions;
import io.muster.launch.Attempt;
import io.muster.launch.Attempts;
import io.muster.launch.GangSpec;
import io.muster.launch.OnPreemption;
import io.muster.launch.Rerun;
import io.muster.strategy.MultiWorkerMirroredStrategy;
import java.io.Serializable;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.Set;
import java.util.UUID;
import java.util.function.Consumer;
import java.util.function.Function;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.apache.hadoop.util.ShutdownHookManager;
import org.apache.spark.HashPartitioner;
import org.apache.spark.SparkConf;
import org.apache.spark.SparkContext;
import org.apache.spark.api.java.JavaPairRDD;
import org.apache.spark.api.java.JavaRDD;
import org.apache.spark.api.java.JavaSparkContext;
import org.apache.spark.rdd.RDD;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.types.StructType;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import scala.Tuple2;
import scala.reflect.ClassTag;
import scala.reflect.ClassTag$;

/**
 * Gang-scheduled training from Spark: a barrier stage with one task per member of the gang (by
 * default {@code numWorkers} workers; with {@link Builder#chief}, {@link Builder#ps} and
 * {@link Builder#evaluator}, TensorFlow's other roles), the data repartitioned into one shard per
 * chief and worker. The tasks run the train function together as one job ({@link TrainContext});
 * the chief's result is returned. Or each task runs an external command
 * ({@link #run(Dataset, ExternalCommand)}) with its {@code TF_CONFIG} and its shard as TFRecord
 * files, and the job ends by the launch core's tracked/untracked rule ({@link GangSpec}).
 *
 * <p>{@link Builder#build()} checks every option; {@link #fit} and {@code run} check the Spark application
 * before any task starts (dynamic allocation off, enough task slots for the whole gang at once)
 * and fails with the setting to change instead of letting Spark wait for slots. Each task binds its
 * server before publishing its address (no port race); a fresh job token is made per run. When a
 * task fails, every task of the gang fails with it (the coordination service sees to that) and
 * the whole gang is re-run, up to {@code maxAttempts} times, with {@link TrainContext#attempt()}
 * counting up; a train function using {@link TrainContext#backupAndRestore} resumes where the
 * last backup left it. Which failures are re-run is the launch core's {@link Rerun} rule, the same
 * as on YARN: by default only the cluster's failures (a task killed or lost, a peer that died, so
 * the runtime's collective, coordination and RPC errors, a command killed by a signal or past its
 * timeout), a {@link RetryableException} and a command's exit code {@link Rerun#EX_TEMPFAIL}. Any
 * other exception the train function throws, and any other non-zero exit code, fails the run at
 * once, since it would fail the same way again; {@link Builder#rerun} with {@link Rerun#ANY_FAILURE}
 * re-runs those too.
 *
 * <p>One file because it is the user's entry point: the builder's options, the checks of the Spark
 * application and the loop over attempts are what a user reads together; the tasks
 * ({@link BarrierTasks}), the command's link to the driver ({@link CommandLogs}) and the rendezvous
 * ({@link GangRendezvous}) are apart.
 */
public final class BarrierTrainer {

  private static final Logger log = LoggerFactory.getLogger(BarrierTrainer.class);
  /** Longer address-exchange waits than this are warned about (Spark's default is a year). */
  static final long MAX_BARRIER_SYNC_SECONDS = 3600;
  /** Spark setting: how long a gang run may take to form, from its job's submission (default 10min). */
  public static final String GANG_TIMEOUT = "spark.muster.gangTimeout";
  /**
   * Spark setting: how long a re-run of the gang waits for task slots free for the whole gang at
   * once (default 2min, and at most the gang timeout); then the job fails, naming every executor.
   */
  public static final String SLOT_TIMEOUT = "spark.muster.slotTimeout";
  /** Spark setting: where the tasks exchange their addresses, {@code driver} (default) or Spark's {@code allGather}. */
  public static final String RENDEZVOUS = "spark.muster.rendezvous";
  /** Why a train function's own failure was not re-run, and how to have it re-run. */
  static final String FUNCTION_NOT_RERUN = "the train function's own failure, which a re-run would repeat; throw "
      + "RetryableException, or build the trainer with rerun(Rerun.ANY_FAILURE), to have the gang re-run";
  /** The same for a command: the launch core's words, with {@code muster spark-run}'s option and the builder's. */
  static final String COMMAND_NOT_RERUN = Rerun.notRerun("--rerun any-failure (in Java, rerun(Rerun.ANY_FAILURE))");
  private static final Pattern LOCAL = Pattern.compile("local(?:\\[(\\d+|\\*)(?:,\\d+)?])?");
  private static final Pattern LOCAL_CLUSTER = Pattern.compile("local-cluster\\[(\\d+),\\s*(\\d+),\\s*\\d+]");

  private final GangSpec gang;
  private final int maxAttempts;
  private final Rerun rerun;
  private final int gpusPerWorker;
  private final String host;
  private final CoordinationOptions coordination;
  private final CommunicationOptions communication;
  private final Consumer<CommandLine> commandLogs;
  private final Duration gangTimeout;

  private BarrierTrainer(Builder b, GangSpec gang) {
    this.gang = gang;
    this.maxAttempts = b.maxAttempts;
    this.rerun = b.rerun;
    this.gpusPerWorker = b.gpusPerWorker;
    this.host = b.host;
    this.coordination = b.coordination;
    this.communication = b.communication;
    this.commandLogs = b.commandLogs;
    this.gangTimeout = b.gangTimeout;
  }

  public static Builder builder() {
    return new Builder();
  }

  /** The tasks of the gang: chief, workers, ps tasks, evaluator. */
  public GangSpec gang() {
    return gang;
  }

  /** Trains on a DataFrame's rows; see {@link #fit(JavaRDD, TrainFunction)}. */
  public <R extends Serializable> R fit(Dataset<Row> data, TrainFunction<Row, R> fn) {
    return fit(data.javaRDD(), fn);
  }

  /**
   * Runs the barrier stage and returns the chief's result. The tasks join through
   * {@code MultiWorkerMirroredStrategy}, so the gang may have a chief and workers only.
   *
   * @throws IllegalStateException naming the Spark setting when the application cannot run the
   *     whole gang at once
   * @throws IllegalArgumentException when the gang has ps or evaluator tasks
   */
  public <T, R extends Serializable> R fit(JavaRDD<T> data, TrainFunction<T, R> fn) {
    if (gang.ps() > 0 || gang.evaluators() > 0) {
      throw new IllegalArgumentException("fit runs MultiWorkerMirroredStrategy, which has no ps or evaluator tasks, "
          + "but the gang is " + gang + "; run ps and evaluator tasks as an external command "
          + "(run(…, ExternalCommand)), or drop ps(…) and evaluator(…)");
    }
    SparkContext sc = data.context();
    checkApplication(sc.getConf(), gang.size(), gpusPerWorker);
    HadoopConfiguration hadoop = new HadoopConfiguration(sc.hadoopConfiguration());
    JavaRDD<T> shards = shards(data, gang);
    String run = UUID.randomUUID().toString(); // this fit's attempts fence their chiefs' checkpoints by it
    return withRetries(sc, FUNCTION_NOT_RERUN, OnPreemption.TENSORFLOW.savedExitCode(), driver -> {
      BarrierTask<T, R> task = new BarrierTask<>(fn, gang, host, coordination, communication, hadoop, driver, run,
          gpusPerWorker);
      return chiefsResult(shards.rdd().barrier().mapPartitions(task, false, serializable()));
    });
  }

  /**
   * Runs a parameter-server job on the gang (a chief, workers and ps tasks, in-JVM): every task
   * joins through {@code ParameterServerStrategy} with the functions the registry builds; the chief
   * runs {@code fn} with the {@link io.muster.coordinator.ClusterCoordinator} and its result comes
   * back here. The functions read their own data. On Spark a lost task fails the barrier stage, so a
   * dead worker re-runs the whole gang (up to {@code maxAttempts}) instead of being waited for.
   *
   * @throws IllegalArgumentException when the gang has no chief, no ps or no worker, or an evaluator
   */
  public <R extends Serializable> R coordinate(SparkSession spark, CoordinatorFunction.Registry functions,
      CoordinatorFunction<R> fn) {
    if (gang.chiefs() == 0 || gang.ps() == 0 || gang.workers() == 0 || gang.evaluators() > 0) {
      throw new IllegalArgumentException("a parameter-server job needs chief(true), ps(n >= 1) and numWorkers(n >= 1), "
          + "and no evaluator; the gang is " + gang);
    }
    JavaSparkContext jsc = JavaSparkContext.fromSparkContext(spark.sparkContext());
    checkApplication(jsc.getConf(), gang.size(), gpusPerWorker);
    JavaRDD<Object> none = jsc.parallelize(List.of(), gang.size());
    return withRetries(jsc.sc(), FUNCTION_NOT_RERUN, OnPreemption.TENSORFLOW.savedExitCode(), driver -> {
      CoordinatorTask<R> task = new CoordinatorTask<>(fn, functions, gang, host, coordination, driver);
      return chiefsResult(none.rdd().barrier().mapPartitions(task, false, serializable()));
    });
  }

  @SuppressWarnings("unchecked")
  private static <R> ClassTag<R> serializable() {
    return (ClassTag<R>) (ClassTag<?>) ClassTag$.MODULE$.apply(Serializable.class);
  }

  /** The chief's result, the one that comes back from a barrier job of train functions. */
  private static <R> R chiefsResult(RDD<R> results) {
    List<R> chief = new JavaRDD<>(results, results.elementClassTag()).collect();
    if (chief.size() != 1) {
      throw new IllegalStateException("expected one result from the chief, got " + chief.size());
    }
    return chief.get(0);
  }

  /**
   * Runs an external command on every task of the gang, without data (the command reads its own);
   * see {@link #run(Dataset, ExternalCommand)}.
   */
  public Optional<byte[]> run(SparkSession spark, ExternalCommand command) {
    JavaSparkContext jsc = JavaSparkContext.fromSparkContext(spark.sparkContext());
    checkApplication(jsc.getConf(), gang.size(), gpusPerWorker);
    JavaRDD<Row> none = jsc.parallelize(List.<Row>of(), gang.size());
    return runCommand(none, null, command);
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
    checkApplication(data.sparkSession().sparkContext().getConf(), gang.size(), gpusPerWorker);
    new RowExamples(data.schema()); // refuses unsupported columns here, on the driver
    return runCommand(shards(data.javaRDD(), gang), data.schema(), command);
  }

  private Optional<byte[]> runCommand(JavaRDD<Row> shards, StructType schema, ExternalCommand command) {
    Consumer<CommandLine> sink = commandLogs != null ? commandLogs : DriverGang::toLog;
    return withRetries(shards.context(), COMMAND_NOT_RERUN, command.onPreemption().savedExitCode(), sink, driver -> {
      CommandTask task = new CommandTask(command, gang, schema, host, driver, gpusPerWorker);
      ClassTag<byte[]> tag = ClassTag$.MODULE$.apply(byte[].class);
      return new JavaRDD<>(shards.rdd().barrier().mapPartitions(task, false, tag), tag).collect().stream().findFirst();
    });
  }

  private <R> R withRetries(SparkContext sc, String notRerun, int savedExitCode, Function<DriverLink, R> job) {
    return withRetries(sc, notRerun, savedExitCode, DriverGang::toLog, job);
  }

  /**
   * Runs the gang until it succeeds, re-running it while the launch core's {@link Attempts} say so:
   * each run is an {@link Attempt} on the driver ({@link DriverGang}), the barrier job its tasks.
   *
   * @param notRerun why a failure of the gang's own is not re-run, and how to have it re-run
   * @param savedExitCode the exit code by which a task says it saved for a preemption notice
   * @param lines where the commands' lines go
   */
  private <R> R withRetries(SparkContext sc, String notRerun, int savedExitCode, Consumer<CommandLine> lines,
      Function<DriverLink, R> job) {
    Attempts attempts = new Attempts(maxAttempts, rerun, notRerun);
    while (true) {
      Result<R> run = runAttempt(sc, attempts, savedExitCode, lines, job);
      Attempts.Next next = attempts.after(run.outcome());
      if (next instanceof Attempts.RunAgain again) {
        if (run.outcome() instanceof Attempt.Failed failed && failed.kind() == Attempt.Kind.PREEMPTED
            && ShutdownHookManager.get().isShutdownInProgress()) {
          throw new IllegalStateException("the gang saved for a preemption on " + attempts.which() + " while this "
              + "driver shuts down: run the job again to resume where it saved (" + failed.report() + ")");
        }
        log.warn("{}", again.logLine());
        continue;
      }
      Attempts.Done done = (Attempts.Done) next;
      if (!done.succeeded()) {
        throw new IllegalStateException("training " + done.headline(), run.failure());
      }
      if (attempts.number() > 0) {
        log.info("{}", done.headline());
      }
      return run.result();
    }
  }

  /** One run of the gang: its outcome, the chief's result when it succeeded, and how Spark reported a failure. */
  private record Result<R>(Attempt.Outcome outcome, R result, Exception failure) {}

  /**
   * Runs one attempt's barrier job against its {@link DriverGang}. The gang must form within the
   * gang timeout, counted from the job's submission ({@link GangStartWatch} explains what is missing
   * and ends the job when it does not); with {@value #RENDEZVOUS}{@code =allGather}, the tasks
   * exchange addresses by Spark's {@code allGather} instead, within {@code spark.barrier.sync.timeout}.
   * A re-run first removes the executors that went silent with the failed run's tasks, then waits
   * for task slots free for the whole gang: Spark holds a slot for a task it has not heard from for
   * {@code spark.network.timeout}, and a barrier stage submitted without enough free slots waits
   * for them for ever.
   */
  private <R> Result<R> runAttempt(SparkContext sc, Attempts attempts, int savedExitCode,
      Consumer<CommandLine> lines, Function<DriverLink, R> job) {
    SparkConf conf = sc.getConf();
    Duration timeout = gangTimeout != null ? gangTimeout : Duration.ofMillis(conf.getTimeAsMs(GANG_TIMEOUT, "10min"));
    boolean allGather = !rendezvousOnDriver(conf);
    try (DriverGang driver = DriverGang.start(driverHost(conf), gang, attempts.number(), timeout, savedExitCode,
        allGather, lines)) {
      Attempt attempt = driver.attempt();
      if (attempts.number() > 0) {
        String which = attempts.which();
        List<String> removed = GangStartWatch.removeSilentExecutors(sc, which);
        Duration slots = Duration.ofMillis(conf.getTimeAsMs(SLOT_TIMEOUT, "2min"));
        boolean bySlotTimeout = slots.compareTo(timeout) <= 0;
        try {
          GangStartWatch.awaitFreeSlots(sc, gang.size(), which, bySlotTimeout ? slots : timeout,
              bySlotTimeout ? SLOT_TIMEOUT : "the gang timeout", removed);
        } catch (GangStartWatch.SlotsNotFreeException e) { // a re-run would wait for them again
          attempt.abort(Attempt.Kind.NOT_FORMED, e.getMessage());
          return new Result<>(attempt.outcome().orElseThrow(), null, e);
        }
      }
      long deadline = System.nanoTime() + timeout.toNanos();
      return GangStartWatch.around(sc, gang, watch -> {
        if (!allGather) {
          driver.onFormationOverdue(watch::explainMissing, watch::cancel);
        }
        GangStartWatch.awaitSlots(sc, gang.size(), deadline);
        try {
          R result = job.apply(driver.link());
          return new Result<>(new Attempt.Succeeded(), result, null);
        } catch (Exception e) { // Spark's SparkException is checked in Java's eyes
          log.debug("{} failed; as Spark reported it:", attempts.which(), e);
          attempt.settle("the job failed before its tasks said why: " + withoutStackFrames(e.getMessage()).lines()
              .findFirst().orElse(e.toString()));
          return new Result<>(attempt.outcome().orElseThrow(), null, e);
        }
      });
    }
  }

  /** Whether the tasks exchange their addresses through the driver ({@value #RENDEZVOUS}, default {@code driver}). */
  static boolean rendezvousOnDriver(SparkConf conf) {
    String how = conf.get(RENDEZVOUS, "driver");
    return switch (how) {
      case "driver" -> true;
      case "allGather" -> false;
      default -> throw new IllegalArgumentException(RENDEZVOUS + " must be 'driver' or 'allGather'; was '" + how + "'");
    };
  }

  private static String driverHost(SparkConf conf) {
    return conf.get("spark.driver.host", "127.0.0.1");
  }

  /**
   * One partition per member of the gang: the rows spread evenly over the chief's and the workers'
   * partitions (members 0..trainers-1), none on the ps and evaluator tasks' partitions.
   */
  static <T> JavaRDD<T> shards(JavaRDD<T> data, GangSpec gang) {
    if (gang.trainers() == gang.size()) {
      return data.repartition(gang.size());
    }
    int trainers = gang.trainers();
    JavaPairRDD<Integer, T> keyed = JavaPairRDD.fromJavaRDD(data.mapPartitionsWithIndex((partition, rows) -> {
      List<Tuple2<Integer, T>> out = new ArrayList<>();
      int next = partition % trainers; // round robin, each partition starting elsewhere, as repartition does
      while (rows.hasNext()) {
        out.add(new Tuple2<>(next, rows.next()));
        next = (next + 1) % trainers;
      }
      return out.iterator();
    }, false));
    // Keys are 0..trainers-1 < size, so the hash partitioner sends key k to partition k.
    return keyed.partitionBy(new HashPartitioner(gang.size())).values();
  }

  /** Spark puts the failed task's stack trace into the job's message; the cause stays, its frames go. */
  static String withoutStackFrames(String message) {
    return message == null ? null : message.replaceAll("\\n\\s+at [^\\n]*|\\n\\s*\\.\\.\\. \\d+ more", "").strip();
  }

  /** The pre-flight checks, on the driver, before any task starts. */
  static void checkApplication(SparkConf conf, int gangSize, int gpusPerWorker) {
    warnings(conf).forEach(log::warn);
    for (String key : List.of(GANG_TIMEOUT, SLOT_TIMEOUT)) {
      if (conf.contains(key) && conf.getTimeAsMs(key, "10min") <= 0) {
        throw new IllegalArgumentException(key + " must be a positive duration such as 90s or 10min; was '"
            + conf.get(key) + "'");
      }
    }
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
          + gangSize + " tasks running at once on a fixed set of executors; set spark.dynamicAllocation.enabled=false");
    }
    int slots = taskSlots(conf);
    if (slots > 0 && gangSize > slots) {
      throw new IllegalStateException("the gang's " + gangSize + " tasks exceed the " + slots + " task slots this "
          + "application can have at once (master " + conf.get("spark.master", "?") + ", spark.task.cpus "
          + conf.getInt("spark.task.cpus", 1) + "); lower numWorkers (or ps) or give the application more executors "
          + "or cores");
    }
  }

  /** Settings that do not stop a run but can make a failure wait far too long. */
  static List<String> warnings(SparkConf conf) {
    if (rendezvousOnDriver(conf)) {
      return List.of(); // spark.barrier.sync.timeout only bounds allGather
    }
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
    if (master.startsWith("spark://") && conf.contains("spark.cores.max")) {
      // Standalone: the application holds at most spark.cores.max cores (spark-submit --total-executor-cores),
      // in executors of spark.executor.cores each, or of every core of a Worker when that is not set.
      int coresMax = conf.getInt("spark.cores.max", 0);
      int executorCores = conf.getInt("spark.executor.cores", 0);
      return executorCores > 0 ? coresMax / executorCores * (executorCores / taskCpus) : coresMax / taskCpus;
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
    private boolean chief;
    private int ps;
    private boolean evaluator;
    private Set<TaskType> untracked;
    private int maxAttempts = 1;
    private Rerun rerun = Rerun.CLUSTER_FAILURES;
    private int gpusPerWorker;
    private String host;
    private CoordinationOptions coordination = MultiWorkerMirroredStrategy.DEFAULT_COORDINATION;
    private CommunicationOptions communication = CommunicationOptions.DEFAULTS;
    private Consumer<CommandLine> commandLogs;
    private Duration gangTimeout;

    private Builder() {}

    /**
     * How long a gang run may take to form, from its job's submission: Spark finding slots for the
     * whole barrier stage, each task reading its partition, the address exchange. When it passes,
     * the run fails naming the members missing and what their hosts answer (and is re-run, as a
     * cluster's failure). By default the Spark setting {@value BarrierTrainer#GANG_TIMEOUT}, or 10 minutes.
     */
    public Builder gangTimeout(Duration value) {
      this.gangTimeout = value;
      return this;
    }

    /**
     * Where the external commands' lines go on the driver; by default to the log as
     * {@code [worker 2] text} (logger {@code io.muster.spark.CommandLogs}, INFO).
     */
    public Builder commandLogs(Consumer<CommandLine> sink) {
      this.commandLogs = sink;
      return this;
    }

    /** How many {@code worker} tasks (default 1); 0 is allowed beside a chief. */
    public Builder numWorkers(int n) {
      this.numWorkers = n;
      return this;
    }

    /** A {@code chief} task besides the workers (member 0; it gets a data shard and returns the result). */
    public Builder chief(boolean value) {
      this.chief = value;
      return this;
    }

    /** How many {@code ps} tasks (default 0): for {@link #coordinate} or an external command. */
    public Builder ps(int n) {
      this.ps = n;
      return this;
    }

    /** An {@code evaluator} task (in no other task's cluster); external-command mode only. */
    public Builder evaluator(boolean value) {
      this.evaluator = value;
      return this;
    }

    /**
     * The task types that do not end the job (their commands are ended once the tracked tasks are
     * done); default {@link GangSpec#defaultUntracked}: ps and evaluator, and worker when there are
     * a chief and ps tasks.
     */
    public Builder untracked(Set<TaskType> types) {
      requireSet(types, "untracked");
      this.untracked = Set.copyOf(types);
      return this;
    }

    /** How many times the whole gang runs before fit gives up (a failed task fails every task). */
    public Builder maxAttempts(int n) {
      this.maxAttempts = n;
      return this;
    }

    /**
     * Which failed runs of the gang are re-run (while attempts are left): by default the cluster's
     * failures only ({@link Rerun#CLUSTER_FAILURES}); {@link Rerun#ANY_FAILURE} re-runs a train
     * function's own exception and a command's own exit code too.
     */
    public Builder rerun(Rerun value) {
      this.rerun = value;
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

    /** The tasks' coordination options; by default {@link MultiWorkerMirroredStrategy#DEFAULT_COORDINATION}. */
    public Builder coordination(CoordinationOptions value) {
      this.coordination = value;
      return this;
    }

    public Builder communication(CommunicationOptions value) {
      this.communication = value;
      return this;
    }

    private static void requireSet(Object value, String option) {
      if (value == null) {
        throw new IllegalArgumentException(option + " must not be null; leave it unset for its default");
      }
    }

    public BarrierTrainer build() {
      if (numWorkers < (chief ? 0 : 1)) {
        throw new IllegalArgumentException("numWorkers must be >= " + (chief ? 0 : 1) + ", was " + numWorkers);
      }
      if (ps < 0) {
        throw new IllegalArgumentException("ps must be >= 0, was " + ps);
      }
      int chiefs = chief ? 1 : 0;
      int evaluators = evaluator ? 1 : 0;
      GangSpec gang = untracked == null ? GangSpec.of(chiefs, numWorkers, ps, evaluators)
          : new GangSpec(chiefs, numWorkers, ps, evaluators, untracked);
      if (gpusPerWorker < 0) {
        throw new IllegalArgumentException("gpusPerWorker must be >= 0, was " + gpusPerWorker);
      }
      if (maxAttempts < 1) {
        throw new IllegalArgumentException("maxAttempts must be >= 1, was " + maxAttempts);
      }
      if (gangTimeout != null && (gangTimeout.isNegative() || gangTimeout.isZero())) {
        throw new IllegalArgumentException("gangTimeout must be positive, was " + gangTimeout);
      }
      if (host != null && host.isBlank()) {
        throw new IllegalArgumentException("host must be a host name or address, was '" + host + "'");
      }
      requireSet(coordination, "coordination");
      requireSet(communication, "communication");
      requireSet(rerun, "rerun");
      if (communication.timeout().isPresent()) {
        throw new IllegalArgumentException("communication timeout is taken from the coordination heartbeat "
            + "timeout on Spark; leave CommunicationOptions.timeout empty");
      }
      return new BarrierTrainer(this, gang);
    }
  }
}
