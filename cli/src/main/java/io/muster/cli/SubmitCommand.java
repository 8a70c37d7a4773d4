package io.muster.cli;

import io.muster.internal.CommandOptions;
import io.muster.internal.Durations;
import io.muster.cluster.TaskType;
import io.muster.launch.GangSpec;
import io.muster.launch.OnPreemption;
import io.muster.launch.Rerun;
import io.muster.yarn.MusterClient;
import io.muster.yarn.YarnJob;
import io.muster.yarn.local.LocalYarn;
import java.io.IOException;
import java.io.PrintStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Arrays;
import java.util.EnumMap;
import java.util.EnumSet;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.function.Consumer;
import java.util.function.Supplier;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.yarn.api.records.ApplicationId;
import org.apache.hadoop.yarn.api.records.ApplicationReport;
import org.apache.hadoop.yarn.api.records.FinalApplicationStatus;
import org.apache.hadoop.yarn.conf.YarnConfiguration;

/**
 * {@code muster submit}, {@code muster status APPID}, {@code muster kill APPID}: a training job on
 * a YARN queue. {@code submit} checks every option before it talks to YARN, submits, prints the
 * application id and tracking URL, one line per change of state, and the final status with the
 * master's diagnostics; it exits 0 only when the job succeeded, and kills the application when it
 * is interrupted (Ctrl-C) before the end. The cluster is the one {@code HADOOP_CONF_DIR} names.
 *
 * <p>One file because its options, their checks and its help are one list a user reads from top to
 * bottom, and an option added here changes all three; the client ({@link MusterClient}) and the job
 * ({@link YarnJob}) are apart.
 */
final class SubmitCommand {

  static final String USAGE = String.join("\n",
      "usage: muster submit [options]",
      "  --name muster                the application's name",
      "  --queue default              the YARN queue",
      "  --command CMD                every task's command (/bin/sh -c), unless --<type>-command is given",
      "  --<type>-instances N         chief (0-1), worker (default 1), ps, evaluator (0-1)",
      "  --<type>-memory 1g           container memory (512m, 2g, or MB)",
      "  --<type>-vcores 1            container vcores",
      "  --<type>-gpus 0              container GPUs (yarn.io/gpu)",
      "  --<type>-command CMD         that type's command",
      "  --env K=V                    a variable for every command (repeatable)",
      "  --files a.py,conf.json       files every container gets in its working directory (path#name renames)",
      "  --archives venv.tar.gz#venv  archives YARN unpacks there (tar.gz, zip, jar)",
      "  --max-attempts 1             how many times the whole gang runs before the job fails",
      "  --rerun cluster-failures     which failures run the gang again: cluster-failures (a signal, a lost",
      "                               container or node, exit 75) or any-failure (a command's own exit too)",
      "  --gang-timeout 10m           allocation and registration of the whole gang, per attempt",
      "  --output-dir URI             MUSTER_OUTPUT_DIR",
      "  --untracked ps,evaluator     task types whose commands are ended, not awaited (default: ps and",
      "                               evaluator, and worker when there are a chief and ps tasks)",
      "  --node-label EXPR            the node-label expression for every container",
      "  --app-timeout 12h            YARN ends the application when it has run this long",
      "  --preemption-signal TERM     sent to every command when YARN announces it will take a container",
      "  --preemption-exit-code 42    a command's exit after that signal that says it saved (TensorFlow's)",
      "  --conf FILE                  options from a file, one 'name = value' a line (worker-instances = 4,",
      "                               env.NAME = value); the command line's win",
      "  --local                      run on a YARN cluster and HDFS started in this process, then stop them",
      "usage: muster status APPID | muster kill APPID",
      "usage: muster yarn-local [--dir muster-yarn-local]   keep such a cluster running; prints its HADOOP_CONF_DIR");
  private static final List<String> TYPES = List.of("chief", "worker", "ps", "evaluator");
  private static final Duration FOLLOW_LIMIT = Duration.ofDays(365);

  private SubmitCommand() {}

  static int submit(List<String> args, Supplier<Configuration> cluster, PrintStream out, PrintStream err)
      throws Exception {
    if (args.contains("--help")) {
      out.println(USAGE);
      return 0;
    }
    YarnJob job = parse(args, List.of(System.getProperty("java.class.path").split(":")));
    if (!args.contains("--local")) {
      job.outputDir().filter(dir -> !dir.matches("[a-zA-Z][a-zA-Z0-9+.-]*:.*") || dir.startsWith("file:"))
          .ifPresent(dir -> err.println("muster submit: --output-dir " + dir + " is a path on each container's own "
              + "host: the chief's outputs stay on the chief's host; give a URI of the cluster's file system "
              + "(hdfs://...) to have them in one place"));
      return submit(job, cluster.get(), true, out, err, id -> { });
    }
    try (LocalYarn local = LocalYarn.startTemporary()) {
      out.println("muster submit: started a local YARN cluster and HDFS (" + local.configuration().get("fs.defaultFS")
          + ")");
      ApplicationId[] submitted = new ApplicationId[1];
      int code = submit(job, local.configuration(), false, out, err, id -> submitted[0] = id);
      if (submitted[0] != null) {
        for (Path log : local.containerLogs(submitted[0].toString())) {
          out.println("== " + log.getParent().getFileName() + " " + log.getFileName() + " ==");
          Files.readAllLines(log).forEach(out::println);
        }
      }
      return code;
    }
  }

  /** {@code muster yarn-local}: starts a local cluster, prints its configuration directory, runs until stopped. */
  static int yarnLocal(List<String> args, PrintStream out) throws Exception {
    CommandOptions o = CommandOptions.parse(args, Set.of("--dir"), Set.of());
    Path dir = Path.of(o.get("--dir", "muster-yarn-local")).toAbsolutePath();
    checkWritable(dir);
    // Ctrl-C (or SIGTERM) stops the cluster here, not in a JVM shutdown hook: stopped during the JVM's
    // shutdown, the datanode cannot remove its own shutdown hooks and prints two stack traces
    CountDownLatch stop = new CountDownLatch(1);
    for (String signal : List.of("INT", "TERM")) {
      sun.misc.Signal.handle(new sun.misc.Signal(signal), s -> stop.countDown());
    }
    LocalYarn local = LocalYarn.start(dir);
    out.println("HADOOP_CONF_DIR=" + local.confDir());
    out.println("muster yarn-local: running; export HADOOP_CONF_DIR as above and use muster submit, yarn, hdfs; "
        + "Ctrl-C stops it");
    stop.await();
    local.close();
    out.println("muster yarn-local: stopped; its files stay in " + dir);
    return 0;
  }

  /** A directory the cluster can keep its files in: created if need be, a file written and deleted in it. */
  private static void checkWritable(Path dir) {
    try {
      Files.createDirectories(dir);
      Files.delete(Files.createTempFile(dir, ".muster-probe-", ""));
    } catch (IOException e) {
      String why = e instanceof java.nio.file.AccessDeniedException ? "permission denied"
          : e instanceof java.nio.file.FileAlreadyExistsException ? "a file is in the way"
          : e instanceof java.nio.file.FileSystemException f && f.getReason() != null ? f.getReason()
          : e.getMessage();
      throw new UsageException("--dir " + dir + " is not a directory the cluster can write to (" + why + "); give "
          + "one you can write");
    }
  }

  /** @param stageRuntime copy Muster's jars to the cluster (not needed when it runs in this process) */
  private static int submit(YarnJob job, Configuration conf, boolean stageRuntime, PrintStream out, PrintStream err,
      Consumer<ApplicationId> submitted) throws Exception {
    try (MusterClient client = new MusterClient(conf, stageRuntime)) {
      ApplicationId id = client.submit(job);
      submitted.accept(id);
      out.println("muster submit: " + id + " submitted to queue " + job.queue() + " (" + job.gang() + ")");
      AtomicBoolean done = new AtomicBoolean();
      Thread killOnInterrupt = new Thread(() -> {
        if (!done.get()) {
          try {
            client.kill(id);
            err.println("muster submit: interrupted; killed " + id);
          } catch (Exception e) {
            err.println("muster submit: interrupted; could not kill " + id + ": " + e.getMessage());
          }
        }
      }, "muster-submit-kill");
      Runtime.getRuntime().addShutdownHook(killOnInterrupt);
      ApplicationReport report = client.follow(id, FOLLOW_LIMIT, line -> out.println("muster submit: " + line));
      done.set(true);
      Runtime.getRuntime().removeShutdownHook(killOnInterrupt);
      return finalStatus(report, out);
    }
  }

  static int status(List<String> args, Supplier<Configuration> cluster, PrintStream out) throws Exception {
    ApplicationId id = applicationId(args, "status");
    try (MusterClient client = new MusterClient(cluster.get())) {
      out.println("muster status: " + client.describe(id));
      return 0;
    }
  }

  static int kill(List<String> args, Supplier<Configuration> cluster, PrintStream out) throws Exception {
    ApplicationId id = applicationId(args, "kill");
    try (MusterClient client = new MusterClient(cluster.get())) {
      client.kill(id);
      out.println("muster kill: killed " + id);
      return 0;
    }
  }

  /**
   * The cluster {@code HADOOP_CONF_DIR} describes. An unreachable ResourceManager fails within 30 s
   * instead of YARN's 15 minutes of retries, unless the configuration says otherwise.
   */
  static Configuration clusterConfiguration() {
    return clusterConfiguration(System.getenv("HADOOP_CONF_DIR"));
  }

  /**
   * As {@link #clusterConfiguration()}; fails at once, saying what to set, when no file on the class
   * path names a ResourceManager (YARN's client would retry {@code 0.0.0.0:8032} for minutes).
   *
   * @param confDir {@code HADOOP_CONF_DIR}, for the message
   */
  static Configuration clusterConfiguration(String confDir) {
    Configuration conf = new YarnConfiguration();
    if (!namesAResourceManager(conf)) {
      String where = confDir == null || confDir.isBlank() ? "HADOOP_CONF_DIR is not set"
          : "HADOOP_CONF_DIR=" + confDir + " has no yarn-site.xml naming a ResourceManager "
              + "(yarn.resourcemanager.hostname or yarn.resourcemanager.address)";
      throw new IllegalStateException("no YARN cluster is configured: " + where + "; point HADOOP_CONF_DIR at the "
          + "cluster's configuration directory, or use muster submit --local (muster yarn-local keeps a local one "
          + "running and prints its HADOOP_CONF_DIR)");
    }
    if (conf.getLong(YarnConfiguration.RESOURCEMANAGER_CONNECT_MAX_WAIT_MS,
            YarnConfiguration.DEFAULT_RESOURCEMANAGER_CONNECT_MAX_WAIT_MS)
            == YarnConfiguration.DEFAULT_RESOURCEMANAGER_CONNECT_MAX_WAIT_MS) {
      conf.setLong(YarnConfiguration.RESOURCEMANAGER_CONNECT_MAX_WAIT_MS, 30_000);
      conf.setLong(YarnConfiguration.RESOURCEMANAGER_CONNECT_RETRY_INTERVAL_MS, 1_000);
    }
    return conf;
  }

  /** Whether a file other than YARN's defaults sets the ResourceManager's host or address. */
  static boolean namesAResourceManager(Configuration conf) {
    for (String key : List.of(YarnConfiguration.RM_HOSTNAME, YarnConfiguration.RM_ADDRESS)) {
      String[] sources = conf.getPropertySources(key);
      if (sources != null && Arrays.stream(sources).anyMatch(source -> !source.equals("yarn-default.xml"))) {
        return true;
      }
    }
    return conf.getBoolean(YarnConfiguration.RM_HA_ENABLED, YarnConfiguration.DEFAULT_RM_HA_ENABLED);
  }

  private static int finalStatus(ApplicationReport report, PrintStream out) {
    FinalApplicationStatus status = report.getFinalApplicationStatus();
    out.println("muster submit: " + report.getApplicationId() + " " + status
        + (report.getDiagnostics().isBlank() ? "" : ": " + report.getDiagnostics().replace("\n", "\n  ")));
    return status == FinalApplicationStatus.SUCCEEDED ? 0 : 1;
  }

  private static ApplicationId applicationId(List<String> args, String command) {
    if (args.size() != 1) {
      throw new UsageException("give one application id, e.g. muster " + command + " application_1700000000000_0001");
    }
    try {
      return ApplicationId.fromString(args.get(0));
    } catch (IllegalArgumentException e) {
      throw new UsageException("'" + args.get(0) + "' is not an application id (application_<cluster>_<n>)");
    }
  }

  /** The job the options describe; a usage error names the option and what it accepts. */
  static YarnJob parse(List<String> args, List<String> classpath) {
    Set<String> valued = new LinkedHashSet<>(List.of("--name", "--queue", "--command", "--env", "--max-attempts",
        "--rerun", "--gang-timeout", "--output-dir", "--untracked", "--files", "--archives", "--node-label", "--app-timeout",
        "--preemption-signal", "--preemption-exit-code", "--conf"));
    for (String type : TYPES) {
      for (String what : List.of("instances", "memory", "vcores", "gpus", "command")) {
        valued.add("--" + type + "-" + what);
      }
    }
    Map<String, String> fromFile = new HashMap<>();
    List<String> merged = withConfFile(args, valued, fromFile);
    try {
      return parse(CommandOptions.parse(merged, valued, Set.of("--local")), classpath);
    } catch (UsageException e) {
      // an option the file gave (and the command line did not) is named with the file's line
      for (Map.Entry<String, String> option : fromFile.entrySet()) {
        if (e.getMessage().startsWith(option.getKey() + " ") && !args.contains(option.getKey())) {
          throw new UsageException(option.getValue() + ": " + e.getMessage());
        }
      }
      throw e;
    }
  }

  private static YarnJob parse(CommandOptions o, List<String> classpath) {
    Map<TaskType, Integer> counts = new EnumMap<>(TaskType.class);
    Map<TaskType, YarnJob.Resources> resources = new EnumMap<>(TaskType.class);
    Map<TaskType, String> commands = new EnumMap<>(TaskType.class);
    for (String name : TYPES) {
      TaskType type = TaskType.ofJobName(name).orElseThrow();
      int count = integer(o, "--" + name + "-instances", name.equals("worker") ? 1 : 0, 0);
      counts.put(type, count);
      YarnJob.Resources r = new YarnJob.Resources(memoryMb(o, "--" + name + "-memory"),
          integer(o, "--" + name + "-vcores", 1, 1), integer(o, "--" + name + "-gpus", 0, 0));
      String command = o.get("--" + name + "-command", o.get("--command", ""));
      if (count > 0) {
        if (command.isBlank()) {
          throw new UsageException("no command for the " + name + " tasks: give --command CMD or --" + name
              + "-command CMD");
        }
        resources.put(type, r);
        commands.put(type, command);
      }
    }
    GangSpec gang;
    try {
      int chiefs = counts.get(TaskType.CHIEF);
      int ps = counts.get(TaskType.PS);
      Set<TaskType> untracked = o.has("--untracked") ? types(o.get("--untracked", ""))
          : GangSpec.defaultUntracked(chiefs, ps);
      gang = new GangSpec(chiefs, counts.get(TaskType.WORKER), ps, counts.get(TaskType.EVALUATOR), untracked);
    } catch (IllegalArgumentException e) {
      throw new UsageException(e.getMessage());
    }
    Map<String, String> env = new LinkedHashMap<>();
    for (String pair : o.getAll("--env")) {
      int eq = pair.indexOf('=');
      if (eq <= 0) {
        throw new UsageException("--env takes NAME=VALUE, was '" + pair + "'");
      }
      env.put(pair.substring(0, eq), pair.substring(eq + 1));
    }
    try {
      List<YarnJob.Shipped> shipped = new java.util.ArrayList<>();
      for (String option : List.of("--files", "--archives")) {
        for (String spec : o.get(option, "").split(",")) {
          if (!spec.isBlank()) {
            shipped.add(ShippedFiles.parse(spec.strip(), option.equals("--archives")));
          }
        }
      }
      return YarnJob.builder().name(o.get("--name", "muster")).queue(o.get("--queue", "default")).gang(gang)
          .resources(resources).commands(commands).environment(env).maxAttempts(integer(o, "--max-attempts", 1, 1))
          .rerun(Rerun.parse("--rerun", o.get("--rerun", "cluster-failures")))
          .gangTimeout(Durations.parse("--gang-timeout", o.get("--gang-timeout", "10m")))
          .outputDir(o.get("--output-dir", null)).classpath(classpath).shipped(shipped)
          .placement(new YarnJob.Placement(Optional.ofNullable(o.get("--node-label", null)),
              o.has("--app-timeout") ? Optional.of(Durations.parse("--app-timeout", o.get("--app-timeout", "")))
                  : Optional.empty()))
          .preemption(new OnPreemption(o.get("--preemption-signal", OnPreemption.TENSORFLOW.signal()),
              integer(o, "--preemption-exit-code", OnPreemption.TENSORFLOW.savedExitCode(), 1)))
          .build();
    } catch (IllegalArgumentException e) {
      throw new UsageException(e.getMessage());
    }
  }

  /**
   * The options of {@code --conf FILE} (Java properties: {@code worker-instances = 4},
   * {@code env.NAME = value}) before the command line's, so that the command line's win. A setting
   * that is no option is refused naming the file and its line; {@code fromFile} gets where each
   * option given came from ({@code --conf FILE line N}).
   */
  private static List<String> withConfFile(List<String> args, Set<String> valued, Map<String, String> fromFile) {
    int at = args.indexOf("--conf");
    if (at < 0 || at + 1 >= args.size()) {
      return args;
    }
    Path file = Path.of(args.get(at + 1));
    Properties properties = new Properties();
    List<String> lines;
    try (var in = Files.newBufferedReader(file)) {
      properties.load(in);
      lines = Files.readAllLines(file);
    } catch (IOException | IllegalArgumentException e) { // Properties refuses a malformed unicode escape
      throw new UsageException("--conf " + file + " cannot be read: "
          + (e instanceof java.nio.file.NoSuchFileException ? "no such file" : e.getMessage()));
    }
    List<String> merged = new java.util.ArrayList<>();
    for (String key : new java.util.TreeSet<>(properties.stringPropertyNames())) {
      String value = properties.getProperty(key).strip();
      String where = "--conf " + file + " line " + lineOf(lines, key);
      if (key.startsWith("env.")) {
        merged.addAll(List.of("--env", key.substring("env.".length()) + "=" + value));
      } else if (key.equals("local")) {
        if (Boolean.parseBoolean(value)) {
          merged.add("--local");
        }
      } else if (key.equals("conf")) {
        throw new UsageException(where + ": a configuration file cannot name another (conf = " + value + ")");
      } else if (!valued.contains("--" + key)) {
        throw new UsageException(where + ": '" + key + "' is not a setting; the settings are the options without"
            + " their -- (worker-instances = 2, command = python train.py), env.NAME = VALUE and local = true");
      } else {
        fromFile.put("--" + key, where);
        merged.addAll(List.of("--" + key, value));
      }
    }
    merged.addAll(args);
    return merged;
  }

  /** The number of the first line that sets {@code key} (a key ends at '=', ':' or a blank, as Properties reads it). */
  private static int lineOf(List<String> lines, String key) {
    for (int n = 0; n < lines.size(); n++) {
      String line = lines.get(n).stripLeading();
      if (line.startsWith(key) && (line.length() == key.length() || "=: \t".indexOf(line.charAt(key.length())) >= 0)) {
        return n + 1;
      }
    }
    return 0;
  }

  private static Set<TaskType> types(String list) {
    Set<TaskType> types = EnumSet.noneOf(TaskType.class);
    for (String name : list.split(",")) {
      if (name.isBlank()) {
        continue;
      }
      types.add(TaskType.ofJobName(name.strip()).orElseThrow(() -> new UsageException(
          "--untracked takes task types from chief, worker, ps, evaluator; was '" + name.strip() + "'")));
    }
    return types;
  }

  private static int integer(CommandOptions o, String option, int defaultValue, int min) {
    String text = o.get(option, Integer.toString(defaultValue));
    try {
      int value = Integer.parseInt(text);
      if (value >= min) {
        return value;
      }
    } catch (NumberFormatException e) {
      // reported below
    }
    throw new UsageException(option + " must be an integer >= " + min + ", was '" + text + "'");
  }

  private static int memoryMb(CommandOptions o, String option) {
    String text = o.get(option, "1g").toLowerCase(java.util.Locale.ROOT);
    try {
      long mb = text.endsWith("g") ? Long.parseLong(text.substring(0, text.length() - 1)) * 1024
          : text.endsWith("m") ? Long.parseLong(text.substring(0, text.length() - 1)) : Long.parseLong(text);
      if (mb >= 1 && mb <= Integer.MAX_VALUE) {
        return (int) mb;
      }
    } catch (NumberFormatException e) {
      // reported below
    }
    throw new UsageException(option + " must be a memory size such as 512m, 2g or 1024 (MB), was '" + text + "'");
  }

}
