package io.muster.spark;

import io.muster.cluster.ClusterSpec;
import io.muster.cluster.TaskId;
import io.muster.cluster.TfConfig;
import io.muster.data.TfRecordWriter;
import io.muster.launch.TaskProcess;
import io.muster.rpc.JobToken;
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
 * The body of every barrier task in external-command mode: write this task's partition as a
 * TFRecord shard of {@code tf.train.Example}s (with {@code schema.json} beside it), reserve a
 * port and hold it through the address exchange, then release it and start the command with:
 *
 * <ul>
 *   <li>{@code TF_CONFIG}: the cluster ({@code worker} in partition order) and this task;
 *   <li>{@code CUDA_VISIBLE_DEVICES}: this task's GPUs, empty when it has none (so it cannot take
 *       another task's);
 *   <li>{@code MUSTER_TASK_TYPE}, {@code MUSTER_TASK_INDEX}, {@code MUSTER_NUM_WORKERS},
 *       {@code MUSTER_IS_CHIEF} ({@code true}/{@code false}), {@code MUSTER_ATTEMPT} (0, 1, …);
 *   <li>{@code MUSTER_DATA_FILES} (comma-separated), {@code MUSTER_DATA_DIR},
 *       {@code MUSTER_SCHEMA_FILE}: the shard, when the run has data;
 *   <li>{@code MUSTER_WORK_DIR}: a private directory, deleted when the task ends;
 *       {@code MUSTER_RESULT_FILE}: where the chief may leave its result for the driver;
 *   <li>{@code MUSTER_OUTPUT_DIR} when one is configured; {@code MUSTER_JOB_TOKEN}, the run's secret
 *       (Muster's own runtime in the command needs it).
 * </ul>
 *
 * A non-zero exit fails the task with the last lines of the command's stderr; a killed task ends
 * its command.
 */
final class CommandTask extends AbstractFunction1<Iterator<Row>, Iterator<byte[]>> implements java.io.Serializable {

  private static final long serialVersionUID = 1L;
  private static final Logger log = LoggerFactory.getLogger(CommandTask.class);
  /** A result travels back through Spark's task result; larger outputs belong in the output directory. */
  static final long MAX_RESULT_BYTES = 64L << 20;

  private final ExternalCommand command;
  private final StructType schema;
  private final String token;
  private final String host;
  private final String logAddress;
  private final int attempt;
  private final int gpusPerWorker;

  /**
   * @param schema the rows' schema, or null when the run has no data
   * @param logAddress the driver's log receiver, or null to log on the executor
   */
  CommandTask(ExternalCommand command, StructType schema, JobToken token, String host, String logAddress,
      int attempt, int gpusPerWorker) {
    this.command = command;
    this.schema = schema;
    this.token = token.value();
    this.host = host;
    this.logAddress = logAddress;
    this.attempt = attempt;
    this.gpusPerWorker = gpusPerWorker;
  }

  static boolean isReserved(String variable) {
    return variable.equals(TfConfig.ENV) || variable.equals("CUDA_VISIBLE_DEVICES") || variable.startsWith("MUSTER_");
  }

  @Override
  public Iterator<byte[]> apply(Iterator<Row> rows) {
    BarrierTaskContext ctx = BarrierTaskContext.get();
    int numWorkers = ctx.getTaskInfos().length;
    TaskId task = new TaskId("worker", ctx.partitionId());
    String name = task.toString();
    Path workDir = createWorkDir(task);
    try (CommandLogs.Sender logs = CommandLogs.Sender.connect(logAddress, token, name)) {
      List<String> gpus = BarrierTasks.assignedGpus(ctx, gpusPerWorker);
      Map<String, String> env = new LinkedHashMap<>(command.environment());
      if (schema != null) {
        env.putAll(writeShard(CollectionConverters.asJava(rows), workDir.resolve("data"), task, numWorkers));
      }
      String bindHost = host != null ? host : BarrierTasks.executorHost(ctx);
      TfConfig config;
      ServerSocket reserved = reservePort(bindHost, task);
      try {
        String[] addresses = ctx.allGather(bindHost + ":" + reserved.getLocalPort());
        config = TfConfig.of(ClusterSpec.of(Map.of("worker", List.of(addresses))), task);
      } finally {
        closeQuietly(reserved); // released at the last moment: the command binds it next
      }
      env.putAll(environment(config, attempt, gpus, workDir, command.outputDir(), token));
      Optional<byte[]> result = runCommand(ctx, task, env, logs, workDir.resolve("result"));
      return CollectionConverters.asScala(result.stream().iterator());
    } finally {
      deleteRecursively(workDir);
    }
  }

  /** Everything Muster tells the command besides the user's own variables and the data files. */
  static Map<String, String> environment(TfConfig config, int attempt, List<String> gpus, Path workDir,
      String outputDir, String token) {
    TaskId task = config.requireTask();
    Map<String, String> env = new LinkedHashMap<>();
    env.put(TfConfig.ENV, config.toJson());
    env.put("CUDA_VISIBLE_DEVICES", String.join(",", gpus));
    env.put("MUSTER_TASK_TYPE", task.job());
    env.put("MUSTER_TASK_INDEX", Integer.toString(task.index()));
    env.put("MUSTER_NUM_WORKERS", Integer.toString(config.cluster().numTasks("worker")));
    env.put("MUSTER_IS_CHIEF", Boolean.toString(task.index() == 0));
    env.put("MUSTER_ATTEMPT", Integer.toString(attempt));
    env.put("MUSTER_WORK_DIR", workDir.toString());
    env.put("MUSTER_RESULT_FILE", workDir.resolve("result").toString());
    if (outputDir != null) {
      env.put("MUSTER_OUTPUT_DIR", outputDir);
    }
    env.put(JobToken.ENV, token);
    return env;
  }

  private Optional<byte[]> runCommand(BarrierTaskContext ctx, TaskId task, Map<String, String> env,
      TaskProcess.LineSink logs, Path resultFile) {
    String name = task.toString();
    log.info("{}: starting {} (attempt {})", name, command, attempt);
    try (TaskProcess process = TaskProcess.start(name, command.command(), env, Path.of("").toAbsolutePath(), logs,
        command.stderrTailLines(), command.gracePeriod());
        KillWatch watch = new KillWatch(ctx, process::close)) {
      Optional<Integer> exit = process.waitFor(command.timeout().orElse(Duration.ofMillis(Long.MAX_VALUE)));
      if (exit.isEmpty()) {
        process.close();
        throw new IllegalStateException(name + ": `" + command + "` ran past its timeout of "
            + command.timeout().orElseThrow() + " and was ended" + tail(process));
      }
      int code = exit.get();
      if (code != 0) {
        String signal = code > 128 ? " (killed by signal " + (code - 128) + ")" : "";
        throw new IllegalStateException(name + ": `" + command + "` exited with code " + code + signal + tail(process));
      }
      log.info("{}: {} finished", name, command);
      return task.index() == 0 ? readResult(name, resultFile) : Optional.empty(); // worker 0 is the chief
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new IllegalStateException(name + ": interrupted while `" + command + "` ran; it was ended", e);
    }
  }

  private static String tail(TaskProcess process) {
    List<String> tail = process.stderrTail();
    return tail.isEmpty() ? "; it wrote nothing to stderr"
        : "; the last " + tail.size() + " lines of its stderr:\n  " + String.join("\n  ", tail);
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
  private Map<String, String> writeShard(java.util.Iterator<Row> rows, Path dir, TaskId task, int numWorkers) {
    RowExamples examples = new RowExamples(schema);
    Path file = dir.resolve(String.format("part-%05d-of-%05d.tfrecord", task.index(), numWorkers));
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
      return Files.createTempDirectory(root, "muster-worker-" + task.index() + "-");
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
