package io.muster.yarn;

import io.muster.internal.Json;
import io.muster.cluster.TaskType;
import io.muster.launch.GangSpec;
import io.muster.launch.OnPreemption;
import io.muster.launch.Rerun;
import java.math.BigDecimal;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Base64;
import java.util.EnumMap;
import java.util.EnumSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;

/**
 * A training job for YARN, as {@code muster submit} describes it: the gang, each task type's
 * container resources and command, the environment, and the failure policy. Validated when
 * built; travels to the ApplicationMaster as JSON.
 *
 * @param name the application's name
 * @param queue the YARN queue
 * @param gang the tasks by type, and which are untracked
 * @param resources each task type's container (every type of the gang has one)
 * @param commands each task type's command, run with {@code /bin/sh -c} (every type of the gang has one)
 * @param environment more variables for every command (Muster's own cannot be set)
 * @param maxAttempts how many times the whole gang runs before the job fails
 * @param rerun which failed attempts run the gang again
 * @param gangTimeout how long an attempt may take to allocate and register every task
 * @param outputDir {@code MUSTER_OUTPUT_DIR}, when given
 * @param classpath the jars and directories of Muster's runtime, as every NodeManager sees them
 * @param shipped files and archives every container gets in its working directory
 * @param placement where the containers may run and how long the application may live
 * @param preemption how a command hears that YARN will take a container, and how it says it saved
 */
public record YarnJob(String name, String queue, GangSpec gang, Map<TaskType, Resources> resources,
    Map<TaskType, String> commands, Map<String, String> environment, int maxAttempts, Rerun rerun,
    Duration gangTimeout, Optional<String> outputDir, List<String> classpath, List<Shipped> shipped,
    Placement placement, OnPreemption preemption) {

  /** A job with {@link OnPreemption#TENSORFLOW}'s answer to a preemption notice. */
  public YarnJob(String name, String queue, GangSpec gang, Map<TaskType, Resources> resources,
      Map<TaskType, String> commands, Map<String, String> environment, int maxAttempts, Rerun rerun,
      Duration gangTimeout, Optional<String> outputDir, List<String> classpath, List<Shipped> shipped,
      Placement placement) {
    this(name, queue, gang, resources, commands, environment, maxAttempts, rerun, gangTimeout, outputDir, classpath,
        shipped, placement, OnPreemption.TENSORFLOW);
  }

  /**
   * @param nodeLabel the node-label expression for every container, the master's included
   * @param lifetime YARN ends the application when it has run this long ({@code LIFETIME} timeout)
   */
  public record Placement(Optional<String> nodeLabel, Optional<Duration> lifetime) {
    public static final Placement ANYWHERE = new Placement(Optional.empty(), Optional.empty());

    public Placement {
      if (lifetime.filter(d -> d.toSeconds() < 1).isPresent()) {
        throw new IllegalArgumentException("the application timeout must be at least 1 s, was " + lifetime.get());
      }
    }
  }

  /**
   * A file (or an archive, which YARN unpacks) in every container's working directory under
   * {@code name}. Before submission {@code uri} is the client's file; the client stages it on the
   * cluster's file system and fills in what YARN checks the copy against (size, modification time).
   */
  public record Shipped(String name, String uri, boolean archive, long size, long modified) {
    public Shipped {
      if (name == null || name.isBlank() || name.contains("/")) {
        throw new IllegalArgumentException("a shipped file's name must be a plain file name, was '" + name + "'");
      }
    }

    /** {@code path} or {@code path#name}, as {@code --files} and {@code --archives} take them. */
    public static Shipped parse(String spec, boolean archive) {
      int hash = spec.lastIndexOf('#');
      String path = hash < 0 ? spec : spec.substring(0, hash);
      java.nio.file.Path local = java.nio.file.Path.of(path).toAbsolutePath();
      if (!java.nio.file.Files.isRegularFile(local)) {
        throw new IllegalArgumentException((archive ? "--archives" : "--files") + ": " + local
            + " is not a readable file");
      }
      if (archive) {
        checkArchive(local);
      }
      String name = hash < 0 ? local.getFileName().toString() : spec.substring(hash + 1);
      return new Shipped(name, local.toUri().toString(), archive, 0, 0);
    }

    /** An archive YARN unpacks by its name (.zip, .jar, .tar, .tar.gz, .tgz) whose first bytes are of that format. */
    private static void checkArchive(java.nio.file.Path file) {
      String name = file.getFileName().toString().toLowerCase(java.util.Locale.ROOT);
      byte[] head;
      try (java.io.InputStream in = java.nio.file.Files.newInputStream(file)) {
        head = in.readNBytes(512);
      } catch (java.io.IOException e) {
        throw new IllegalArgumentException("--archives: " + file + " cannot be read: " + e.getMessage());
      }
      String format;
      boolean matches;
      if (name.endsWith(".zip") || name.endsWith(".jar")) {
        format = "a zip archive";
        matches = head.length >= 4 && head[0] == 'P' && head[1] == 'K' && head[2] == 3 && head[3] == 4;
      } else if (name.endsWith(".tar.gz") || name.endsWith(".tgz")) {
        format = "gzip-compressed";
        matches = head.length >= 2 && (head[0] & 0xff) == 0x1f && (head[1] & 0xff) == 0x8b;
      } else if (name.endsWith(".tar")) {
        format = "a tar archive";
        matches = head.length >= 262 && new String(head, 257, 5, java.nio.charset.StandardCharsets.US_ASCII)
            .equals("ustar");
      } else {
        throw new IllegalArgumentException("--archives: " + file + " is not named as an archive YARN unpacks (.zip, "
            + ".jar, .tar, .tar.gz or .tgz); ship it with --files instead");
      }
      if (!matches) {
        throw new IllegalArgumentException("--archives: " + file + " is named as an archive but is not "
            + format + "; give the archive itself");
      }
    }
  }

  /** One container's resources. */
  public record Resources(int memoryMb, int vcores, int gpus) {
    public static final Resources DEFAULT = new Resources(1024, 1, 0);

    public Resources {
      if (memoryMb < 1 || vcores < 1 || gpus < 0) {
        throw new IllegalArgumentException("container resources must have memory >= 1 MB, vcores >= 1 and "
            + "gpus >= 0, were " + memoryMb + " MB, " + vcores + " vcores, " + gpus + " gpus");
      }
    }
  }

  public YarnJob {
    if (name == null || name.isBlank()) {
      throw new IllegalArgumentException("the job needs a name");
    }
    if (queue == null || queue.isBlank()) {
      throw new IllegalArgumentException("the job needs a queue (YARN's is 'default')");
    }
    resources = Map.copyOf(resources);
    commands = Map.copyOf(commands);
    for (TaskType type : gang.types()) {
      if (!resources.containsKey(type)) {
        throw new IllegalArgumentException("no container resources for the " + type.jobName() + " tasks");
      }
      String command = commands.get(type);
      if (command == null || command.isBlank()) {
        throw new IllegalArgumentException("no command for the " + type.jobName() + " tasks: give --command or --"
            + type.jobName() + "-command");
      }
    }
    environment = Map.copyOf(environment);
    for (String variable : environment.keySet()) {
      if (io.muster.launch.TaskEnvironment.isReserved(variable)) {
        throw new IllegalArgumentException("the environment variable " + variable + " is set by Muster for each "
            + "task; leave it out of --env");
      }
    }
    if (maxAttempts < 1) {
      throw new IllegalArgumentException("max attempts must be >= 1, was " + maxAttempts);
    }
    java.util.Objects.requireNonNull(rerun, "rerun");
    if (gangTimeout.isNegative() || gangTimeout.isZero()) {
      throw new IllegalArgumentException("the gang timeout must be positive, was " + gangTimeout);
    }
    java.util.Objects.requireNonNull(preemption, "preemption");
    classpath = List.copyOf(classpath);
    shipped = List.copyOf(shipped);
    if (shipped.stream().map(Shipped::name).distinct().count() != shipped.size()) {
      throw new IllegalArgumentException("two shipped files have the same name: "
          + shipped.stream().map(Shipped::name).toList() + "; rename one with path#name");
    }
  }

  public YarnJob withOutputDir(String dir) {
    return new YarnJob(name, queue, gang, resources, commands, environment, maxAttempts, rerun, gangTimeout,
        Optional.of(dir), classpath, shipped, placement, preemption);
  }

  public YarnJob withClasspath(List<String> entries) {
    return new YarnJob(name, queue, gang, resources, commands, environment, maxAttempts, rerun, gangTimeout, outputDir,
        entries, shipped, placement, preemption);
  }

  public YarnJob withShipped(List<Shipped> files) {
    return new YarnJob(name, queue, gang, resources, commands, environment, maxAttempts, rerun, gangTimeout, outputDir,
        classpath, files, placement, preemption);
  }

  public String toJson() {
    Map<String, Object> out = new LinkedHashMap<>();
    out.put("name", name);
    out.put("queue", queue);
    Map<String, Object> tasks = new LinkedHashMap<>();
    for (TaskType type : gang.types()) {
      Resources r = resources.get(type);
      tasks.put(type.jobName(), Map.of("instances", gang.count(type), "memory_mb", r.memoryMb(), "vcores",
          r.vcores(), "gpus", r.gpus(), "command", commands.get(type)));
    }
    out.put("tasks", tasks);
    out.put("untracked", gang.untracked().stream().map(TaskType::jobName).toList());
    out.put("environment", environment);
    out.put("max_attempts", maxAttempts);
    out.put("rerun", rerun.optionValue());
    out.put("gang_timeout_ms", gangTimeout.toMillis());
    out.put("output_dir", outputDir.orElse(null));
    out.put("classpath", classpath);
    out.put("shipped", shipped.stream().map(f -> Map.of("name", f.name(), "uri", f.uri(), "archive", f.archive(),
        "size", f.size(), "modified", f.modified())).toList());
    out.put("node_label", placement.nodeLabel().orElse(null));
    out.put("lifetime_s", placement.lifetime().map(Duration::toSeconds).orElse(null));
    out.put("preemption_signal", preemption.signal());
    out.put("preemption_exit_code", preemption.savedExitCode());
    return Json.write(out);
  }

  /**
   * The JSON in base64, for an environment variable: YARN writes launch environments into a shell
   * script between double quotes, without escaping the quotes inside.
   */
  public String toEnvironmentValue() {
    return Base64.getEncoder().encodeToString(toJson().getBytes(StandardCharsets.UTF_8));
  }

  public static YarnJob fromEnvironmentValue(String value) {
    if (value == null || value.isBlank()) {
      throw new IllegalStateException("the job's description is not in the environment; submit with muster submit");
    }
    return fromJson(new String(Base64.getDecoder().decode(value), StandardCharsets.UTF_8));
  }

  @SuppressWarnings("unchecked")
  public static YarnJob fromJson(String json) {
    Map<String, Object> in = (Map<String, Object>) Json.parse(json);
    Map<String, Object> tasks = (Map<String, Object>) in.get("tasks");
    Map<TaskType, Resources> resources = new EnumMap<>(TaskType.class);
    Map<TaskType, String> commands = new EnumMap<>(TaskType.class);
    Map<TaskType, Integer> counts = new EnumMap<>(TaskType.class);
    tasks.forEach((job, raw) -> {
      Map<String, Object> t = (Map<String, Object>) raw;
      TaskType type = TaskType.ofJobName(job).orElseThrow();
      counts.put(type, number(t.get("instances")));
      resources.put(type, new Resources(number(t.get("memory_mb")), number(t.get("vcores")), number(t.get("gpus"))));
      commands.put(type, (String) t.get("command"));
    });
    Set<TaskType> untracked = EnumSet.noneOf(TaskType.class);
    ((List<String>) in.get("untracked")).forEach(j -> untracked.add(TaskType.ofJobName(j).orElseThrow()));
    GangSpec gang = new GangSpec(counts.getOrDefault(TaskType.CHIEF, 0), counts.getOrDefault(TaskType.WORKER, 0),
        counts.getOrDefault(TaskType.PS, 0), counts.getOrDefault(TaskType.EVALUATOR, 0), untracked);
    return new YarnJob((String) in.get("name"), (String) in.get("queue"), gang, resources, commands,
        (Map<String, String>) in.get("environment"), number(in.get("max_attempts")),
        Rerun.parse("rerun", (String) in.get("rerun")),
        Duration.ofMillis(((BigDecimal) in.get("gang_timeout_ms")).longValueExact()),
        Optional.ofNullable((String) in.get("output_dir")), (List<String>) in.get("classpath"),
        ((List<Map<String, Object>>) in.get("shipped")).stream().map(f -> new Shipped((String) f.get("name"),
            (String) f.get("uri"), (Boolean) f.get("archive"), ((BigDecimal) f.get("size")).longValueExact(),
            ((BigDecimal) f.get("modified")).longValueExact())).toList(),
        new Placement(Optional.ofNullable((String) in.get("node_label")),
            Optional.ofNullable((BigDecimal) in.get("lifetime_s")).map(d -> Duration.ofSeconds(d.longValueExact()))),
        new OnPreemption((String) in.get("preemption_signal"), number(in.get("preemption_exit_code"))));
  }

  private static int number(Object raw) {
    return ((BigDecimal) raw).intValueExact();
  }
}
