package io.muster.spark;

import io.muster.cluster.HostPort;
import io.muster.cluster.TaskId;
import io.muster.data.TfRecordWriter;
import io.muster.launch.Attempt;
import io.muster.launch.GangMember;
import io.muster.launch.GangSpec;
import io.muster.launch.TaskEnvironment;
import io.muster.launch.TaskProcess;
import io.muster.proto.gang.Line;
import io.muster.rpc.Security;
import io.muster.rpc.TlsFiles;
import java.io.BufferedOutputStream;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import org.apache.spark.BarrierTaskContext;
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
 * tasks and the evaluator, which get no data. Each task reserves a port and holds it while it joins
 * the driver's gang ({@link TaskLink}), then releases it and starts the command with what
 * {@link TaskEnvironment} lists, plus {@code MUSTER_DATA_FILES} (comma-separated), {@code MUSTER_DATA_DIR}
 * and {@code MUSTER_SCHEMA_FILE} for a task with a shard, and {@code MUSTER_TLS_*} when the job has TLS.
 *
 * <p>The command's lines go to the driver, and its exit too; the driver's verdict is the launch
 * core's ({@link io.muster.launch.Attempt}). A failed command's task waits for the driver's word
 * that the gang has ended before it fails, so that Spark ends the others only once the verdict
 * stands. When the driver says the gang has ended (a failure, a lost host), the task ends its
 * command with the failure grace period; an untracked task ends its command when the driver says
 * every tracked task has finished, and succeeds; a task killed by Spark for another reason (a
 * user's cancel) ends it with the grace period. When the executor is decommissioned or shuts down
 * ({@link ExecutorNotices}), the task passes the notice to the driver, which passes it to every
 * task of the gang; each sends its command the preemption signal ({@link ExternalCommand#withPreemption}).
 * The task's work directory is deleted when the task ends, and by the command's guard when this JVM
 * is killed.
 */
final class CommandTask extends AbstractFunction1<Iterator<Row>, Iterator<byte[]>> implements java.io.Serializable {

  private static final long serialVersionUID = 3L;
  private static final Logger log = LoggerFactory.getLogger(CommandTask.class);
  /** A result travels back through Spark's task result; larger outputs belong in the output directory. */
  static final long MAX_RESULT_BYTES = 64L << 20;

  private final ExternalCommand command;
  private final GangSpec gang;
  private final StructType schema;
  private final String host;
  private final DriverLink driver;
  private final int gpusPerWorker;

  /** @param schema the rows' schema, or null when the run has no data */
  CommandTask(ExternalCommand command, GangSpec gang, StructType schema, String host, DriverLink driver,
      int gpusPerWorker) {
    this.command = command;
    this.gang = gang;
    this.schema = schema;
    this.host = host;
    this.driver = driver;
    this.gpusPerWorker = gpusPerWorker;
  }

  @Override
  public Iterator<byte[]> apply(Iterator<Row> rows) {
    BarrierTaskContext ctx = BarrierTaskContext.get();
    int member = ctx.partitionId();
    TaskId task = gang.task(member);
    Path workDir = BarrierTasks.createWorkDir(task);
    try (ExecutorNotices.Listener notices = ExecutorNotices.listen(task)) {
      Security security = driver.security(workDir.resolve("tls"));
      List<String> gpus = BarrierTasks.assignedGpus(ctx, task, gpusPerWorker);
      Map<String, String> env = new LinkedHashMap<>(command.environment());
      if (schema != null && member < gang.trainers()) {
        env.putAll(writeShard(CollectionConverters.asJava(rows), workDir.resolve("data"), task, member));
      }
      String bindHost = host != null ? host : BarrierTasks.executorHost(ctx);
      Told told = new Told(task);
      ServerSocket reserved = reservePort(bindHost, task);
      try (TaskLink link = TaskLink.join(ctx, driver, security, task, new HostPort(bindHost, reserved.getLocalPort()),
          told)) {
        List<HostPort> addresses;
        try {
          addresses = link.awaitGang();
        } finally {
          closeQuietly(reserved); // released at the last moment: the command binds it next
        }
        env.putAll(TaskEnvironment.of(gang.formed(addresses), member, driver.attempt(), gpus, workDir,
            Optional.ofNullable(command.outputDir()), security.token()));
        security.tls().ifPresent(tls -> env.putAll(Map.of(TlsFiles.CERT_ENV, tls.certificateChain().toString(),
            TlsFiles.KEY_ENV, tls.privateKey().toString(), TlsFiles.CA_ENV, tls.trustedCertificates().toString())));
        TaskEnvironment.putTemporaryDirectory(env, workDir);
        Optional<byte[]> result = runCommand(ctx, task, env, link, told, notices, workDir);
        return CollectionConverters.asScala(result.stream().iterator());
      }
    } catch (IOException e) {
      throw new UncheckedIOException(task + ": " + e.getMessage(), e);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new IllegalStateException(task + ": interrupted while `" + command + "` ran; it was ended", e);
    } finally {
      BarrierTasks.deleteRecursively(workDir);
    }
  }

  /** What the driver told the task, applied to its command once it runs. */
  private static final class Told implements GangMember.Listener {
    private final String task;
    private TaskProcess process; // guarded by this
    private String signal; // guarded by this
    private String notice; // guarded by this
    private boolean signalled; // guarded by this
    private boolean ended; // guarded by this
    private String aborted; // guarded by this

    Told(TaskId task) {
      this.task = task.toString();
    }

    void attach(TaskProcess process, String signal) {
      synchronized (this) {
        this.process = process;
        this.signal = signal;
      }
      apply();
    }

    @Override
    public void preempt(String notice) {
      synchronized (this) {
        this.notice = this.notice == null ? notice : this.notice;
      }
      apply();
    }

    @Override
    public void end() {
      synchronized (this) {
        ended = true;
      }
      apply();
    }

    @Override
    public void abort(String reason) {
      synchronized (this) {
        aborted = reason;
      }
      apply();
    }

    synchronized boolean ended() {
      return ended;
    }

    synchronized boolean noticed() {
      return notice != null;
    }

    synchronized boolean aborted() {
      return aborted != null;
    }

    /** Signals or ends the command as told; ending it blocks up to its grace period, outside the lock. */
    private void apply() {
      TaskProcess running;
      String sendSignal = null;
      boolean abort;
      boolean end;
      synchronized (this) {
        running = process;
        if (running == null) {
          return;
        }
        if (notice != null && !signalled && aborted == null && !ended) {
          signalled = true;
          sendSignal = signal;
        }
        abort = aborted != null;
        end = ended;
      }
      if (sendSignal != null && running.isAlive()) {
        log.info("{}: {}; sending the command SIG{} to save and leave", task, notice, sendSignal);
        running.signal(sendSignal);
      }
      if (abort) {
        running.endAfterFailure();
      } else if (end) {
        running.close();
      }
    }
  }

  private Optional<byte[]> runCommand(BarrierTaskContext ctx, TaskId task, Map<String, String> env, TaskLink link,
      Told told, ExecutorNotices.Listener notices, Path workDir) throws InterruptedException {
    Path resultFile = workDir.resolve(TaskEnvironment.RESULT_FILE);
    String name = task.toString();
    GangMember member = link.member();
    log.info("{}: starting `{}` ({})", name, command, Attempt.named(driver.attempt()));
    try (TaskProcess process = TaskProcess.start(name, command.command(), env, Path.of("").toAbsolutePath(),
        (stream, text) -> {
          if (!member.line(Line.Stream.valueOf(stream.name()), text)) {
            DriverGang.toLog(new CommandLine(name, stream, text)); // the driver is gone: the executor's log keeps it
          }
        }, command.stderrTailLines(), command.gracePeriod(), command.failureGracePeriod(), Optional.of(workDir));
        KillWatch watch = new KillWatch(ctx, () -> {
          // after the driver's word the gang has ended; otherwise a user's cancel: a polite end
          if (told.aborted()) {
            process.endAfterFailure();
          } else {
            process.close();
          }
        })) {
      told.attach(process, command.onPreemption().signal());
      notices.deliverTo(notice -> {
        member.notice(notice);
        told.preempt(notice);
      });
      Optional<Integer> exit = process.waitFor(command.timeout().orElse(Duration.ofMillis(Long.MAX_VALUE)));
      if (exit.isEmpty()) {
        process.close();
      }
      int code = exit.isPresent() ? exit.get() : process.waitFor(Duration.ZERO).orElse(137);
      String story = exit.isEmpty() ? "ran past its timeout of " + command.timeout().orElseThrow() + " and was ended"
          + TaskProcess.stderrStory(process.stderrTail()) : code == 0 ? "" : TaskProcess.exitStory(code,
          process.stderrTail());
      boolean afterGang = told.aborted() || told.ended();
      member.exited(new Attempt.Exit(exit.isEmpty() && code == 0 ? 137 : code, afterGang, story,
          process.stderrTail()));
      if (told.ended()) {
        log.info("{}: ended `{}`: the tasks the job awaits have all finished", name, command);
        return Optional.empty();
      }
      if (code == 0 && exit.isPresent() && !afterGang) {
        log.info("{}: `{}` exited 0", name, command);
        return task.equals(gang.chief()) ? readResult(name, resultFile) : Optional.empty();
      }
      Optional<String> verdict = BarrierTasks.awaitVerdict(link, told.noticed());
      throw new IllegalStateException(name + ": `" + command + "` " + (story.isEmpty() ? "exited with code " + code
          : story) + verdict.map(why -> "; the gang ended: " + why).orElse(""));
    }
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
}
