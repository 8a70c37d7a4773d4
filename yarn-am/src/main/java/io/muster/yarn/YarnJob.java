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

  /** A job's description, validated by {@link Builder#build()}: {@code name}, {@code gang} and a command are required. */
  public static Builder builder() {
    return new Builder();
  }

  /** A builder of the same job, to change some of it. */
  public Builder toBuilder() {
    return new Builder().name(name).queue(queue).gang(gang).resources(resources).commands(commands)
        .environment(environment).maxAttempts(maxAttempts).rerun(rerun).gangTimeout(gangTimeout)
        .outputDir(outputDir.orElse(null)).classpath(classpath).shipped(shipped).placement(placement)
        .preemption(preemption);
  }

  /**
   * Options with defaults that suit most jobs: queue {@code default}, {@link Resources#DEFAULT} for
   * every task type, one attempt, {@link Rerun#CLUSTER_FAILURES}, a gang timeout of 10 minutes,
   * {@link OnPreemption#TENSORFLOW}. {@link #build()} checks them all, naming the option.
   */
  public static final class Builder {
    private String name;
    private String queue = "default";
    private GangSpec gang;
    private Map<TaskType, Resources> resources;
    private Map<TaskType, String> commands = Map.of();
    private String oneCommand;
    private Map<String, String> environment = Map.of();
    private int maxAttempts = 1;
    private Rerun rerun = Rerun.CLUSTER_FAILURES;
    private Duration gangTimeout = Duration.ofMinutes(10);
    private String outputDir;
    private List<String> classpath = List.of();
    private List<Shipped> shipped = List.of();
    private Placement placement = Placement.ANYWHERE;
    private OnPreemption preemption = OnPreemption.TENSORFLOW;

    private Builder() {}

    public Builder name(String value) {
      name = value;
      return this;
    }

    public Builder queue(String value) {
      queue = value;
      return this;
    }

    public Builder gang(GangSpec value) {
      gang = value;
      return this;
    }

    /** Each task type's container; by default {@link Resources#DEFAULT} for every type of the gang. */
    public Builder resources(Map<TaskType, Resources> value) {
      resources = value;
      return this;
    }

    /** Each task type's command, run with {@code /bin/sh -c}. */
    public Builder commands(Map<TaskType, String> value) {
      commands = value;
      return this;
    }

    /** One command for every task type of the gang. */
    public Builder command(String value) {
      commands = null;
      oneCommand = value;
      return this;
    }

    public Builder environment(Map<String, String> value) {
      environment = value;
      return this;
    }

    public Builder maxAttempts(int value) {
      maxAttempts = value;
      return this;
    }

    public Builder rerun(Rerun value) {
      rerun = value;
      return this;
    }

    public Builder gangTimeout(Duration value) {
      gangTimeout = value;
      return this;
    }

    /** {@code MUSTER_OUTPUT_DIR}; null for none. */
    public Builder outputDir(String value) {
      outputDir = value;
      return this;
    }

    public Builder classpath(List<String> value) {
      classpath = value;
      return this;
    }

    public Builder shipped(List<Shipped> value) {
      shipped = value;
      return this;
    }

    public Builder placement(Placement value) {
      placement = value;
      return this;
    }

    public Builder preemption(OnPreemption value) {
      preemption = value;
      return this;
    }

    /** @throws IllegalArgumentException naming the option that is missing or wrong */
    public YarnJob build() {
      require(gang, "gang");
      Map<TaskType, Resources> containers = resources;
      if (containers == null) {
        containers = new EnumMap<>(TaskType.class);
        for (TaskType type : gang.types()) {
          containers.put(type, Resources.DEFAULT);
        }
      }
      Map<TaskType, String> perType = commands;
      if (perType == null) {
        perType = new EnumMap<>(TaskType.class);
        for (TaskType type : gang.types()) {
          perType.put(type, oneCommand);
        }
      }
      return new YarnJob(name, queue, gang, require(containers, "resources"), require(perType, "commands"),
          require(environment, "environment"), maxAttempts, require(rerun, "rerun"), require(gangTimeout,
          "gangTimeout"), Optional.ofNullable(outputDir), require(classpath, "classpath"), require(shipped, "shipped"),
          require(placement, "placement"), require(preemption, "preemption"));
    }

    private static <T> T require(T value, String option) {
      if (value == null) {
        throw new IllegalArgumentException(option + " must not be null; leave it unset for its default");
      }
      return value;
    }
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
    if (rerun == null) {
      throw new IllegalArgumentException("rerun must not be null");
    }
    if (gangTimeout.isNegative() || gangTimeout.isZero()) {
      throw new IllegalArgumentException("the gang timeout must be positive, was " + gangTimeout);
    }
    if (preemption == null) {
      throw new IllegalArgumentException("preemption must not be null");
    }
    classpath = List.copyOf(classpath);
    shipped = List.copyOf(shipped);
    if (shipped.stream().map(Shipped::name).distinct().count() != shipped.size()) {
      throw new IllegalArgumentException("two shipped files have the same name: "
          + shipped.stream().map(Shipped::name).toList() + "; rename one with path#name");
    }
  }

  public YarnJob withOutputDir(String dir) {
    return toBuilder().outputDir(dir).build();
  }

  public YarnJob withClasspath(List<String> entries) {
    return toBuilder().classpath(entries).build();
  }

  public YarnJob withShipped(List<Shipped> files) {
    return toBuilder().shipped(files).build();
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
    return builder().name((String) in.get("name")).queue((String) in.get("queue")).gang(gang).resources(resources)
        .commands(commands).environment((Map<String, String>) in.get("environment"))
        .maxAttempts(number(in.get("max_attempts"))).rerun(Rerun.parse("rerun", (String) in.get("rerun")))
        .gangTimeout(Duration.ofMillis(((BigDecimal) in.get("gang_timeout_ms")).longValueExact()))
        .outputDir((String) in.get("output_dir")).classpath((List<String>) in.get("classpath"))
        .shipped(((List<Map<String, Object>>) in.get("shipped")).stream().map(f -> new Shipped((String) f.get("name"),
            (String) f.get("uri"), (Boolean) f.get("archive"), ((BigDecimal) f.get("size")).longValueExact(),
            ((BigDecimal) f.get("modified")).longValueExact())).toList())
        .placement(new Placement(Optional.ofNullable((String) in.get("node_label")),
            Optional.ofNullable((BigDecimal) in.get("lifetime_s")).map(d -> Duration.ofSeconds(d.longValueExact()))))
        .preemption(new OnPreemption((String) in.get("preemption_signal"), number(in.get("preemption_exit_code"))))
        .build();
  }

  private static int number(Object raw) {
    return ((BigDecimal) raw).intValueExact();
  }
}
