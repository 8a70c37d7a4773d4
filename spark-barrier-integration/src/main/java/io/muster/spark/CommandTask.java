package io.muster.spark;

import io.muster.cluster.HostPort;
import io.muster.cluster.TaskId;
import io.muster.data.TfRecordWriter;
import io.muster.launch.GangSpec;
import io.muster.launch.OnPreemption;
import io.muster.launch.Rerun;
import io.muster.launch.TaskEnvironment;
import io.muster.launch.TaskProcess;
import io.muster.rpc.JobToken;
import io.muster.strategy.PreemptedException;
import java.io.BufferedOutputStream;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Comparator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.Consumer;
import java.util.stream.Stream;
import org.apache.spark.BarrierTaskContext;
import org.apache.spark.SparkFiles;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.types.StructType;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import scala.collection.Iterator;
import scala.jdk.javaapi.CollectionConverters;
import scala.runtime.AbstractFunction1;

/**
 * The body of every barrier task in external-command mode. Partition {@code p} is member {@code p}
 * of the gang ({@link GangSpec#task}): the chief and workers first, each writing its partition as
 * a TFRecord shard of {@code tf.train.Example}s (with {@code schema.json} beside it), then the ps
 * tasks and the evaluator, which get no data. Each task reserves a port and holds it through the
 * address exchange, then releases it and starts the command with what {@link TaskEnvironment}
 * lists, plus {@code MUSTER_DATA_FILES} (comma-separated), {@code MUSTER_DATA_DIR} and
 * {@code MUSTER_SCHEMA_FILE} for a task with a shard.
 *
 * <p>A tracked task's non-zero exit fails the task with the last lines of the command's stderr;
 * an untracked task runs until the driver says every tracked task has finished
 * ({@link CommandLogs}), then ends its command (SIGTERM, SIGKILL after the grace period) and
 * succeeds. When the gang fails (the driver says so, or Spark kills the task because another task
 * of the barrier stage failed), the task ends its command with the failure grace period; a task
 * killed for another reason (a user's cancel) ends it with the grace period. When the executor is
 * decommissioned or shuts down ({@link ExecutorNotices}), the task passes the notice to the driver,
 * which passes it to every task of the gang; each sends its command the preemption signal
 * ({@link ExternalCommand#withPreemption}), and when the driver says the gang has left for the
 * notice, fails with a {@link PreemptedException}, which the driver re-runs without counting. A
 * task whose command exited after the signal waits for that word while its peers save. The task's
 * work directory is deleted when the task ends, and by the command's guard when this JVM is killed.
 */
final class CommandTask extends AbstractFunction1<Iterator<Row>, Iterator<byte[]>> implements java.io.Serializable {

  private static final long serialVersionUID = 2L;
  private static final Logger log = LoggerFactory.getLogger(CommandTask.class);
  /** How long past the cause window the driver's word on a failure may take to arrive. */
  private static final Duration DRIVERS_WORD = Duration.ofSeconds(2);
  /** A result travels back through Spark's task result; larger outputs belong in the output directory. */
  static final long MAX_RESULT_BYTES = 64L << 20;

  private final ExternalCommand command;
  private final GangSpec gang;
  private final StructType schema;
  private final String token;
  private final String host;
  private final String driverAddress;
  private final BarrierTasks.Rendezvous rendezvous;
  private final int attempt;
  private final int gpusPerWorker;

  /**
   * @param schema the rows' schema, or null when the run has no data
   * @param driverAddress the driver's {@link CommandLogs.Receiver}
   */
  CommandTask(ExternalCommand command, GangSpec gang, StructType schema, JobToken token, String host,
      String driverAddress, BarrierTasks.Rendezvous rendezvous, int attempt, int gpusPerWorker) {
    this.command = command;
    this.gang = gang;
    this.schema = schema;
    this.token = token.value();
    this.host = host;
    this.driverAddress = driverAddress;
    this.rendezvous = rendezvous;
    this.attempt = attempt;
    this.gpusPerWorker = gpusPerWorker;
  }

  @Override
  public Iterator<byte[]> apply(Iterator<Row> rows) {
    BarrierTaskContext ctx = BarrierTaskContext.get();
    int member = ctx.partitionId();
    TaskId task = gang.task(member);
    Path workDir = createWorkDir(task);
    try (CommandLogs.Sender driver = CommandLogs.Sender.connect(driverAddress, token, task);
        ExecutorNotices.Listener notices = ExecutorNotices.listen(task)) {
      if (!gang.isTracked(task) && !driver.connected()) {
        throw new IllegalStateException(task + " is untracked: the driver at " + driverAddress + " ends it when "
            + "every tracked task has finished, but it cannot reach the driver (see the warning above)");
      }
      List<String> gpus = BarrierTasks.assignedGpus(ctx, task, gpusPerWorker);
      Map<String, String> env = new LinkedHashMap<>(command.environment());
      if (schema != null && member < gang.trainers()) {
        env.putAll(writeShard(CollectionConverters.asJava(rows), workDir.resolve("data"), task, member));
      }
      String bindHost = host != null ? host : BarrierTasks.executorHost(ctx);
      List<HostPort> addresses;
      ServerSocket reserved = reservePort(bindHost, task);
      try {
        addresses = BarrierTasks.exchange(ctx, rendezvous, task, new HostPort(bindHost, reserved.getLocalPort()));
      } finally {
        closeQuietly(reserved); // released at the last moment: the command binds it next
      }
      env.putAll(TaskEnvironment.of(gang.formed(addresses), member, attempt, gpus, workDir,
          Optional.ofNullable(command.outputDir()), JobToken.of(token)));
      try {
        TaskEnvironment.putTemporaryDirectory(env, workDir);
      } catch (IOException e) {
        throw new UncheckedIOException(task + ": cannot create its temporary directory in " + workDir + ": "
            + e.getMessage(), e);
      }
      Optional<byte[]> result = runCommand(ctx, task, env, driver, notices, workDir);
      return CollectionConverters.asScala(result.stream().iterator());
    } finally {
      deleteRecursively(workDir);
    }
  }

  private Optional<byte[]> runCommand(BarrierTaskContext ctx, TaskId task, Map<String, String> env,
      CommandLogs.Sender driver, ExecutorNotices.Listener notices, Path workDir) {
    Path resultFile = workDir.resolve(TaskEnvironment.RESULT_FILE);
    String name = task.toString();
    log.info("{}: starting `{}` (attempt {})", name, command, attempt + 1);
    AtomicBoolean endedByDriver = new AtomicBoolean();
    AtomicReference<CommandLogs.GangFailed> gangFailure = new AtomicReference<>();
    try (TaskProcess process = TaskProcess.start(name, command.command(), env, Path.of("").toAbsolutePath(), driver,
        command.stderrTailLines(), command.gracePeriod(), command.failureGracePeriod(), Optional.of(workDir));
        KillWatch watch = new KillWatch(ctx, () -> {
          String reason = String.valueOf(ctx.getKillReason().getOrElse(() -> "killed"));
          if (reason.contains("barrier stage")) { // Spark's words when another task of the stage failed
            gangFailure.compareAndSet(null, new CommandLogs.GangFailed("Spark killed the task: " + reason, false));
            process.endAfterFailure();
          } else {
            process.close();
          }
        })) {
      if (!gang.isTracked(task)) {
        driver.onEnd(() -> {
          endedByDriver.set(true);
          process.close();
        });
      }
      OnPreemption onPreemption = command.onPreemption();
      AtomicBoolean noticed = new AtomicBoolean();
      Consumer<String> preempt = notice -> {
        if (noticed.compareAndSet(false, true) && process.isAlive()) {
          log.info("{}: {}; sending `{}` SIG{} to save and leave", name, notice, command, onPreemption.signal());
          process.signal(onPreemption.signal());
        }
      };
      driver.onNotice(preempt);
      notices.deliverTo(notice -> {
        driver.noticed(notice);
        preempt.accept(notice);
      });
      driver.onGangFailure(failure -> {
        // A command that already ended (its own failure, as every `false` of a gang) keeps its own story.
        if (process.isAlive()) {
          gangFailure.compareAndSet(null, failure);
          process.endAfterFailure();
        }
      });
      Optional<Integer> exit = process.waitFor(command.timeout().orElse(Duration.ofMillis(Long.MAX_VALUE)));
      if (exit.isEmpty()) {
        process.close();
        throw new IllegalStateException(name + ": `" + command + "` ran past its timeout of "
            + command.timeout().orElseThrow() + " and was ended" + TaskProcess.stderrStory(process.stderrTail()));
      }
      int code = exit.get();
      CommandLogs.GangFailed failedGang = gangFailure.get();
      if (code != 0 && failedGang != null) {
        driver.exited(code, "");
        if (failedGang.preempted()) {
          throw new PreemptedException(name + ": `" + command + "` was ended (exit code " + code + ") because the gang "
              + "left for a preemption: " + failedGang.reason());
        }
        // The first failure's story, with its verdict: the driver tells that whichever task's failure Spark reports.
        String failure = name + ": `" + command + "` was ended (exit code " + code + ") because the gang failed: "
            + failedGang.reason();
        throw failedGang.usersOwn() ? new UsersFailureException(failure) : new IllegalStateException(failure);
      }
      String failure = code == 0 ? "" : name + ": `" + command + "` "
          + TaskProcess.exitStory(code, process.stderrTail());
      driver.exited(code, failure);
      if (endedByDriver.get()) {
        log.info("{}: ended `{}`: the tasks the job awaits have all finished", name, command);
        return Optional.empty();
      }
      if (code != 0 && noticed.get()) {
        throw leftAfterNotice(name, code, driver);
      }
      if (code != 0) {
        throw failure(name, code, failure, driver);
      }
      log.info("{}: `{}` exited 0", name, command);
      return task.equals(gang.chief()) ? readResult(name, resultFile) : Optional.empty();
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new IllegalStateException(name + ": interrupted while `" + command + "` ran; it was ended", e);
    }
  }

  /**
   * A command exited non-zero after its preemption signal: saved, with the saved exit code, or not.
   * The others may still be saving, and this task's failure would have Spark kill them: it waits for
   * the driver's word that the gang has left (once the tracked commands have exited, at once after
   * one that did not save, or at the driver's deadline).
   */
  private RuntimeException leftAfterNotice(String name, int code, CommandLogs.Sender driver)
      throws InterruptedException {
    boolean saved = code == command.onPreemption().savedExitCode();
    String story = name + ": `" + command + "` " + (saved ? "saved for the preemption (exit code " + code + ")"
        : "exited with code " + code + " after the preemption signal");
    Optional<CommandLogs.GangFailed> gang = driver.awaitGangFailure(OnPreemption.SAVED_PEERS_WAIT.plus(DRIVERS_WORD));
    if (gang.isEmpty()) {
      return saved ? new PreemptedException(story) : new IllegalStateException(story);
    }
    String told = story + "; " + gang.get().reason();
    return gang.get().preempted() ? new PreemptedException(told)
        : gang.get().usersOwn() ? new UsersFailureException(told) : new IllegalStateException(told);
  }

  /**
   * The task's failure, with the launch core's verdict ({@link Rerun}). A command's own exit code
   * waits for the driver's word: a cluster's failure of another task heard within
   * {@link Rerun#CAUSE_WINDOW} is taken for its cause, and another task's earlier failure is the
   * gang's story; without a word the code is the verdict.
   */
  private RuntimeException failure(String name, int code, String failure, CommandLogs.Sender driver)
      throws InterruptedException {
    if (!Rerun.isCommandsOwn(code)) {
      return new IllegalStateException(failure);
    }
    Optional<CommandLogs.GangFailed> gang = driver.awaitGangFailure(Rerun.CAUSE_WINDOW.plus(DRIVERS_WORD));
    if (gang.isEmpty() || gang.get().reason().equals(failure)) {
      return new UsersFailureException(failure);
    }
    if (gang.get().preempted()) {
      return new PreemptedException(name + ": `" + command + "` exited with code " + code + " after the gang's "
          + gang.get().reason());
    }
    String story = name + ": `" + command + "` exited with code " + code + " because the gang failed: "
        + gang.get().reason();
    return gang.get().usersOwn() ? new UsersFailureException(story) : new IllegalStateException(story);
  }

  private static Optional<byte[]> readResult(String name, Path file) {
    try {
      if (!Files.exists(file)) {
        return Optional.empty();
      }
      long size = Files.size(file);
      if (size > MAX_RESULT_BYTES) {
        throw new IllegalStateException(name + ": the result file " + file + " holds " + size + " bytes, more than "
            + MAX_RESULT_BYTES + " that travel back to the driver; write large outputs to MUSTER_OUTPUT_DIR and "
            + "return their location instead");
      }
      return Optional.of(Files.readAllBytes(file));
    } catch (IOException e) {
      throw new UncheckedIOException(name + ": cannot read the result file " + file + ": " + e.getMessage(), e);
    }
  }

  /** Writes the partition as one TFRecord file and the schema; returns the variables that name them. */
  private Map<String, String> writeShard(java.util.Iterator<Row> rows, Path dir, TaskId task, int shard) {
    RowExamples examples = new RowExamples(schema);
    Path file = dir.resolve(String.format("part-%05d-of-%05d.tfrecord", shard, gang.trainers()));
    Path schemaFile = dir.resolve("schema.json");
    long count = 0;
    try {
      Files.createDirectories(dir);
      try (TfRecordWriter out = new TfRecordWriter(new BufferedOutputStream(Files.newOutputStream(file), 1 << 16))) {
        while (rows.hasNext()) {
          out.write(examples.toExample(rows.next()).toByteArray());
          count++;
        }
      }
      Files.writeString(schemaFile, examples.schema().toJson());
    } catch (IOException e) {
      throw new UncheckedIOException(task + ": cannot write its data shard to " + file + ": " + e.getMessage(), e);
    }
    if (count == 0) {
      log.warn("{}: its partition is empty; the command gets an empty shard (give the job more rows or fewer workers)",
          task);
    }
    log.info("{}: wrote {} rows to {}", task, count, file);
    return Map.of("MUSTER_DATA_DIR", dir.toString(), "MUSTER_DATA_FILES", file.toString(),
        "MUSTER_SCHEMA_FILE", schemaFile.toString());
  }

  private static Path createWorkDir(TaskId task) {
    Path root = Path.of(SparkFiles.getRootDirectory()).toAbsolutePath();
    try {
      return Files.createTempDirectory(root, "muster-" + task.job() + "-" + task.index() + "-");
    } catch (IOException e) {
      throw new UncheckedIOException(task + ": cannot create its work directory under " + root + ": "
          + e.getMessage(), e);
    }
  }

  private static ServerSocket reservePort(String host, TaskId task) {
    try {
      ServerSocket socket = new ServerSocket();
      socket.setReuseAddress(true);
      socket.bind(new InetSocketAddress(InetAddress.getByName(host), 0));
      return socket;
    } catch (IOException e) {
      throw new UncheckedIOException(task + ": cannot reserve a port on " + host + ": " + e.getMessage(), e);
    }
  }

  private static void closeQuietly(ServerSocket socket) {
    try {
      socket.close();
    } catch (IOException ignored) {
      // released either way
    }
  }

  private static void deleteRecursively(Path dir) {
    try (Stream<Path> paths = Files.walk(dir)) {
      paths.sorted(Comparator.reverseOrder()).forEach(p -> p.toFile().delete());
    } catch (IOException e) {
      log.warn("cannot delete the work directory {}: {}", dir, e.toString());
    }
  }
}
