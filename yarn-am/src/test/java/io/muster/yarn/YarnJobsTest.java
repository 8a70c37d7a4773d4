package io.muster.yarn;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.muster.checkpoint.CheckpointManager;
import io.muster.internal.Json;
import io.muster.cluster.TaskType;
import io.muster.cluster.TfConfig;
import io.muster.launch.GangSpec;
import io.muster.launch.Rerun;
import io.muster.testing.Eventually;
import io.muster.testing.Pids;
import io.muster.testing.PythonTensorFlow;
import io.muster.yarn.local.JavaPermissionsLocalFs;
import io.muster.yarn.local.LocalYarn;
import java.io.IOException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.PrivilegedExceptionAction;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.EnumMap;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.regex.Pattern;
import java.util.stream.Stream;
import org.apache.hadoop.fs.FileContext;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.security.UserGroupInformation;
import org.apache.hadoop.yarn.api.records.ApplicationId;
import org.apache.hadoop.yarn.api.records.ApplicationReport;
import org.apache.hadoop.yarn.api.records.FinalApplicationStatus;
import org.apache.hadoop.yarn.api.records.YarnApplicationState;
import org.apache.hadoop.yarn.client.api.YarnClient;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/** Muster's client, ApplicationMaster and task executors on {@link LocalYarn}: two NodeManagers of 4096 MB. */
class YarnJobsTest {

  private static final Duration LIMIT = Duration.ofMinutes(3);
  private static LocalYarn local;
  private static MusterClient client;

  @TempDir Path dir;

  @BeforeAll
  static void start() throws Exception {
    local = LocalYarn.start(Path.of("target", "local-yarn-" + YarnJobsTest.class.getSimpleName()));
    client = new MusterClient(local.configuration());
  }

  @AfterAll
  static void stop() throws Exception {
    client.close();
    local.close();
  }

  private static YarnJob job(GangSpec gang, String command, int memoryMb, int maxAttempts, Duration gangTimeout) {
    return job(gang, command, memoryMb, maxAttempts, gangTimeout, Optional.of("file:///tmp/muster-test-out"));
  }

  private static YarnJob job(GangSpec gang, String command, int memoryMb, int maxAttempts, Duration gangTimeout,
      Optional<String> outputDir) {
    Map<TaskType, YarnJob.Resources> resources = new EnumMap<>(TaskType.class);
    for (TaskType type : gang.types()) {
      resources.put(type, new YarnJob.Resources(memoryMb, 1, 0));
    }
    return YarnJob.builder().name("muster-test").gang(gang).resources(resources).command(command)
        .environment(Map.of("GREETING", "hello")).maxAttempts(maxAttempts).gangTimeout(gangTimeout)
        .outputDir(outputDir.orElse(null)).classpath(List.of(System.getProperty("java.class.path").split(":")))
        .build();
  }

  private static ApplicationReport runToEnd(YarnJob job) throws Exception {
    ApplicationId id = client.submit(job);
    List<String> progress = new ArrayList<>();
    ApplicationReport report = client.follow(id, LIMIT, progress::add);
    assertTrue(Set.of(FinalApplicationStatus.SUCCEEDED, FinalApplicationStatus.FAILED)
        .contains(report.getFinalApplicationStatus()), "the job ended within " + LIMIT + ": " + progress);
    return report;
  }

  /** A Python command checks its TF_CONFIG against its peers' (check_tf_config.py); the workers and the ps never exit. */
  @Test
  void aParameterServerGangSucceedsWithTheChiefAndItsServingTasksAreEnded() throws Exception {
    Path script = PythonTensorFlow.script("check_tf_config.py", dir);
    Path shared = Files.createDirectories(dir.resolve("shared"));
    Path out = Files.createDirectories(dir.resolve("out"));
    // a local output directory reaches the command as a plain path: a shell's redirect and Python's open write there
    String named = "$MUSTER_TASK_TYPE-$MUSTER_TASK_INDEX";
    String command = "echo \"$GREETING $MUSTER_NUM_WORKERS $MUSTER_IS_CHIEF $MUSTER_OUTPUT_DIR\" > " + dir
        + "/env-" + named + "; echo sh > \"$MUSTER_OUTPUT_DIR/sh-" + named + "\" && python3 -c 'import os; "
        + "e = os.environ; open(e[\"MUSTER_OUTPUT_DIR\"] + \"/py-\" + e[\"MUSTER_TASK_TYPE\"] + \"-\" + "
        + "e[\"MUSTER_TASK_INDEX\"], \"w\").write(\"py\")' && exec python3 "
        + script + " " + shared;
    ApplicationId id = client.submit(job(GangSpec.of(1, 2, 1, 0), command, 128, 1, Duration.ofMinutes(2),
        Optional.of("file://" + out)));
    ApplicationReport report = client.follow(id, LIMIT, line -> { });

    assertEquals(FinalApplicationStatus.SUCCEEDED, report.getFinalApplicationStatus(), report.getDiagnostics());
    assertEquals("succeeded on attempt 1 of 1", report.getDiagnostics());
    List<String> printed = containerLines(id);
    assertTrue(printed.contains("checked 4 tasks: all agree"), printed.toString());
    TfConfig chief = TfConfig.parse(Files.readString(shared.resolve("tf-chief-0")));
    assertEquals(Set.of("chief", "worker", "ps"), chief.cluster().jobs());
    for (String task : List.of("chief-0", "worker-0", "worker-1", "ps-0")) {
      long pid = Long.parseLong(Files.readString(shared.resolve("pid-" + task)).trim());
      Eventually.within(Duration.ofSeconds(30), task + "'s command has ended", () -> !Pids.running(pid));
    }
    assertEquals("hello 3 true " + out, Files.readString(dir.resolve("env-chief-0")).trim());
    assertEquals("hello 3 false " + out, Files.readString(dir.resolve("env-ps-0")).trim());
    for (String t : List.of("chief-0", "worker-0", "worker-1", "ps-0")) {
      assertEquals("sh\n", Files.readString(out.resolve("sh-" + t)));
      assertEquals("py", Files.readString(out.resolve("py-" + t)));
    }
  }

  @Test
  @SuppressWarnings("unchecked")
  void theStatusPageListsEveryTaskWithItsStateAndTfConfigWhileTheJobRuns() throws Exception {
    Path release = dir.resolve("release");
    String command = "n=0; while [ ! -f " + release + " ] && [ $n -lt 1200 ]; do sleep 0.1; n=$((n+1)); done";
    ApplicationId id = client.submit(job(GangSpec.of(1, 1, 0, 0), command, 128, 1, Duration.ofMinutes(2)));
    List<String> progress = new java.util.concurrent.CopyOnWriteArrayList<>();
    java.util.concurrent.CompletableFuture<ApplicationReport> followed = java.util.concurrent.CompletableFuture
        .supplyAsync(() -> {
          try {
            return client.follow(id, LIMIT, progress::add);
          } catch (Exception e) {
            throw new IllegalStateException(e);
          }
        });
    Eventually.within(Duration.ofSeconds(90), "the client reports the whole gang running", () ->
        progress.contains(id + " attempt 1: 1 chief running; 1 worker running"));
    HttpClient http = HttpClient.newHttpClient();
    Map<String, Object>[] status = new Map[1];
    String[] page = new String[1];
    Eventually.within(Duration.ofSeconds(90), "the status page shows both tasks running", () -> {
      try {
        String url = client.report(id).getOriginalTrackingUrl();
        if (url == null || !url.startsWith("http")) {
          return false;
        }
        status[0] = (Map<String, Object>) Json.parse(http.send(HttpRequest.newBuilder(URI.create(url + "status.json"))
            .build(), HttpResponse.BodyHandlers.ofString()).body());
        page[0] = http.send(HttpRequest.newBuilder(URI.create(url)).build(), HttpResponse.BodyHandlers.ofString())
            .body();
      } catch (Exception e) { // not up yet
        return false;
      }
      List<Map<String, Object>> tasks = (List<Map<String, Object>>) status[0].get("tasks");
      return tasks.size() == 2 && tasks.stream().allMatch(t -> "running".equals(t.get("state")));
    });
    // muster status: the master's own page, since this cluster's proxy has no port
    assertEquals(id + " RUNNING (" + client.report(id).getOriginalTrackingUrl() + "); attempt 1: 1 chief running; "
        + "1 worker running", client.describe(id));
    Files.createFile(release);
    assertEquals(FinalApplicationStatus.SUCCEEDED, followed.get().getFinalApplicationStatus(), progress.toString());
    assertTrue(client.describe(id).startsWith(id + " SUCCEEDED: succeeded on attempt 1"), client.describe(id));
    assertTrue(progress.stream().noneMatch(line -> line.contains(":0/")), "no URL with port 0: " + progress);

    assertEquals("running", status[0].get("state"));
    assertEquals(Map.of(), status[0].get("lost_nodes"));
    List<Map<String, Object>> tasks = (List<Map<String, Object>>) status[0].get("tasks");
    assertEquals(List.of("chief 0", "worker 0"), tasks.stream().map(t -> t.get("task")).toList());
    for (Map<String, Object> task : tasks) {
      assertTrue(task.get("container").toString().startsWith("container_"), task.toString());
      assertTrue(task.get("logs").toString().contains("/node/containerlogs/" + task.get("container") + "/"),
          task.toString());
      TfConfig config = TfConfig.parse((String) task.get("tf_config"));
      assertEquals(task.get("task"), config.requireTask().toString());
      assertEquals(Set.of("chief", "worker"), config.cluster().jobs());
    }
    assertTrue(page[0].contains("<meta http-equiv=\"refresh\"") && page[0].contains("<td>chief 0</td>")
        && page[0].contains("<td>worker 0</td>"), page[0]);
    assertFalse(page[0].contains("MUSTER_JOB_TOKEN") || status[0].toString().contains("token"), "no token shown");
  }

  /** Muster's Java workers on YARN; returns the weights' digests the tasks printed. */
  private static List<String> runJavaWorkers(String out, String... args) throws Exception {
    String java = Path.of(System.getProperty("java.home"), "bin", "java").toString();
    String command = java + " -Xmx128m -cp " + System.getProperty("java.class.path") + " "
        + YarnJavaWorker.class.getName() + " " + String.join(" ", args);
    YarnJob job = job(GangSpec.of(1, 2, 0, 0), command, 384, 2, Duration.ofMinutes(2));
    job = job.withOutputDir(out);
    ApplicationId id = client.submit(job);
    ApplicationReport report = client.follow(id, LIMIT, line -> { });
    assertEquals(FinalApplicationStatus.SUCCEEDED, report.getFinalApplicationStatus(), report.getDiagnostics());
    List<String> printed = containerLines(id);
    assertTrue(printed.contains("attempt " + (args.length == 0 ? 0 : 1) + " starts at epoch " + (args.length == 0
        ? "0" : args[0])), "the attempt that finished started where the backup left it: " + printed);
    return printed.stream().filter(l -> l.startsWith("weights-sha256 ")).toList();
  }

  @Test
  void aParameterServerJobRunsWithItsChiefWorkersAndPsOnYarn() throws Exception {
    String java = Path.of(System.getProperty("java.home"), "bin", "java").toString();
    String command = java + " -Xmx128m -cp " + System.getProperty("java.class.path") + " " + YarnPsTask.class.getName();
    ApplicationId id = client.submit(job(GangSpec.of(1, 2, 1, 0), command, 384, 1, Duration.ofMinutes(2)));
    ApplicationReport report = client.follow(id, LIMIT, line -> { });
    assertEquals(FinalApplicationStatus.SUCCEEDED, report.getFinalApplicationStatus(), report.getDiagnostics());
    List<String> printed = containerLines(id);
    assertTrue(printed.contains("counted 40.0 on workers [0, 1]"), "the chief's count: " + printed);
  }

  @Test
  void musterJavaWorkersResumeFromTheirBackupAfterACrashAndEndAsAnUninterruptedRun() throws Exception {
    String hdfs = local.configuration().get("fs.defaultFS");
    List<String> uninterrupted = runJavaWorkers(hdfs + "/jobs/java-mwms");
    assertEquals(3, uninterrupted.size(), "chief and both workers printed their weights");
    assertEquals(1, uninterrupted.stream().distinct().count(), "identical weights on every task: " + uninterrupted);
    List<String> resumed = runJavaWorkers(hdfs + "/jobs/java-mwms-crashed", "2");
    assertEquals(uninterrupted, resumed, "the re-run gang resumed at epoch 2 and ends with the same weights");

    String out = hdfs + "/jobs/java-mwms";
    FileSystem fs = FileSystem.get(URI.create(out), local.configuration());
    assertEquals(Optional.of(fs.makeQualified(new org.apache.hadoop.fs.Path(out, "ckpt-4"))),
        CheckpointManager.latestCheckpoint(fs, new org.apache.hadoop.fs.Path(out)).map(fs::makeQualified));
    assertEquals(List.of(), Arrays.stream(fs.listStatus(new org.apache.hadoop.fs.Path(out)))
        .map(s -> s.getPath().getName()).filter(n -> n.startsWith("workertemp")).toList(), "no workertemp_* left");
    assertEquals(0, fs.listStatus(new org.apache.hadoop.fs.Path(out, "backup")).length,
        "the backup is deleted when training ends well");
  }

  @Test
  void shippedFilesAndArchivesAreInEveryContainersWorkingDirectoryAndTheStagingIsDeleted() throws Exception {
    Path script = Files.writeString(dir.resolve("train.sh"), "echo \"script ran on $MUSTER_TASK_TYPE\"\n");
    Path env = Files.createDirectories(dir.resolve("env"));
    Files.writeString(env.resolve("inside.txt"), "from the archive\n");
    Path archive = dir.resolve("env.tar.gz");
    assertEquals(0, new ProcessBuilder("tar", "czf", archive.toString(), "-C", env.toString(), "inside.txt")
        .inheritIO().start().waitFor());
    YarnJob job = job(GangSpec.workers(2), "sh run.sh && cat venv/inside.txt", 128, 1, Duration.ofMinutes(2))
        .withShipped(List.of(new YarnJob.Shipped("run.sh", script.toUri().toString(), false, 0, 0),
            new YarnJob.Shipped("venv", archive.toUri().toString(), true, 0, 0)));
    ApplicationId id = client.submit(job);
    ApplicationReport report = client.follow(id, LIMIT, line -> { });

    assertEquals(FinalApplicationStatus.SUCCEEDED, report.getFinalApplicationStatus(), report.getDiagnostics());
    List<String> printed = containerLines(id);
    assertEquals(2, printed.stream().filter(l -> l.equals("script ran on worker")).count(), printed.toString());
    assertEquals(2, printed.stream().filter(l -> l.equals("from the archive")).count(), printed.toString());
    FileSystem fs = FileSystem.get(local.configuration());
    assertFalse(fs.exists(MusterClient.stagingDir(fs, id.toString())), "the master deleted the staged files");
  }

  @Test
  void tasksAndTheMasterUseHdfsAsTheSubmittingUserNotTheNodeManagers() throws Exception {
    FileSystem superuser = FileSystem.get(local.configuration());
    for (String home : List.of("/user/carol", "/jobs/carol")) {
      superuser.mkdirs(new org.apache.hadoop.fs.Path(home));
      superuser.setOwner(new org.apache.hadoop.fs.Path(home), "carol", null);
    }
    String out = local.configuration().get("fs.defaultFS") + "/jobs/carol";
    String java = Path.of(System.getProperty("java.home"), "bin", "java").toString();
    YarnJob job = job(GangSpec.workers(1), "cat shipped.txt && " + java + " -Xmx128m -cp " + local.confDir() + ":"
        + System.getProperty("java.class.path") + " " + YarnTokensTask.class.getName(), 256, 1, Duration.ofMinutes(2))
        .withOutputDir(out)
        .withShipped(List.of(new YarnJob.Shipped("shipped.txt", Files.writeString(dir.resolve("shipped.txt"), "x\n")
            .toUri().toString(), false, 0, 0)));
    UserGroupInformation carol = UserGroupInformation.createRemoteUser("carol");

    ApplicationReport report = carol.doAs((PrivilegedExceptionAction<ApplicationReport>) () -> {
      try (MusterClient asCarol = new MusterClient(local.configuration())) {
        return asCarol.follow(asCarol.submit(job), LIMIT, line -> { });
      }
    });

    assertEquals(FinalApplicationStatus.SUCCEEDED, report.getFinalApplicationStatus(), report.getDiagnostics());
    assertEquals("carol", superuser.getFileStatus(new org.apache.hadoop.fs.Path(out, "worker-0")).getOwner(),
        "the task wrote as the submitting user, though its process is the NodeManager's user's");
    assertFalse(superuser.exists(new org.apache.hadoop.fs.Path("/user/carol/.muster/" + report.getApplicationId())),
        "the master deleted carol's staged files");
  }

  /**
   * {@code MUSTER_LOG_LEVEL=debug muster submit ...}: the master and the executors log at debug, as
   * the client does (a container gets only the environment its launch context names, not its
   * NodeManager's); without it, at info.
   */
  @Test
  void theClientsLogLevelIsTheContainersLevel() throws Exception {
    YarnJob job = job(GangSpec.workers(1), "true", 128, 1, Duration.ofMinutes(2));
    Map<String, List<String>> atDebug;
    try (MusterClient debugging = new MusterClient(local.configuration(), false,
        Map.of("MUSTER_LOG_LEVEL", "debug"))) {
      ApplicationId id = debugging.submit(job);
      assertEquals(FinalApplicationStatus.SUCCEEDED,
          debugging.follow(id, LIMIT, line -> { }).getFinalApplicationStatus());
      atDebug = stderrByContainer(id);
    }
    ApplicationId quiet = client.submit(job);
    assertEquals(FinalApplicationStatus.SUCCEEDED,
        client.follow(quiet, LIMIT, line -> { }).getFinalApplicationStatus());
    Map<String, List<String>> atInfo = stderrByContainer(quiet);

    assertEquals(2, atDebug.size(), "the master's and the executor's logs: " + atDebug.keySet());
    assertTrue(atDebug.get("master").stream()
            .anyMatch(l -> l.matches("\\S+ DEBUG the warm-up call was answered: .*")),
        String.join("\n", atDebug.get("master")));
    assertTrue(atDebug.get("executor").stream()
            .anyMatch(l -> l.matches("\\S+ DEBUG worker 0: the gang's addresses: .*")),
        String.join("\n", atDebug.get("executor")));
    assertTrue(atInfo.get("executor").stream()
            .anyMatch(l -> l.contains(" INFO  worker 0: the command exited with code 0")),
        String.join("\n", atInfo.get("executor")));
    assertTrue(atInfo.values().stream().flatMap(List::stream).noneMatch(l -> l.contains(" DEBUG ")),
        atInfo.toString());
  }

  /**
   * A command's TMPDIR is {@code tmp} in its task's private directory, which goes with the task's
   * container, unless the job names one.
   */
  @Test
  void aCommandsTemporaryFilesGoWithItsTask() throws Exception {
    String mktemp = "f=$(mktemp) && echo \"$f $MUSTER_WORK_DIR\" > " + dir + "/tmp-$MUSTER_ATTEMPT-";
    YarnJob job = job(GangSpec.workers(1), mktemp + "default", 128, 1, Duration.ofMinutes(2));
    assertEquals(FinalApplicationStatus.SUCCEEDED, runToEnd(job).getFinalApplicationStatus());
    String[] made = Files.readString(dir.resolve("tmp-0-default")).trim().split(" ");
    assertTrue(made[0].startsWith(made[1] + "/tmp/tmp."), String.join(" ", made));

    Path own = Files.createDirectories(dir.resolve("own"));
    YarnJob named = job(GangSpec.workers(1), mktemp + "named", 128, 1, Duration.ofMinutes(2));
    assertEquals(FinalApplicationStatus.SUCCEEDED, runToEnd(named.toBuilder().environment(Map.of("TMPDIR",
        own.toString())).build()).getFinalApplicationStatus());
    assertTrue(Files.readString(dir.resolve("tmp-0-named")).startsWith(own + "/tmp."));
  }

  /**
   * The NodeManagers set the containers' file permissions in Java (JavaPermissionsLocalFs), as a
   * node with Hadoop's native library does, not by a chmod process each: the same modes.
   */
  @Test
  void theNodeManagersSetTheContainersFilePermissionsInJava() throws Exception {
    assertEquals(JavaPermissionsLocalFs.class, FileContext.getLocalFSFileContext().getDefaultFileSystem().getClass());
    ApplicationReport report = runToEnd(job(GangSpec.workers(1), "true", 128, 1, Duration.ofMinutes(2)));
    assertEquals(FinalApplicationStatus.SUCCEEDED, report.getFinalApplicationStatus());
    ApplicationId id = report.getApplicationId();
    Map<String, Integer> modes = new HashMap<>();
    try (Stream<Path> files = Files.walk(local.directory())) {
      for (Path p : files.filter(p -> p.toString().contains("/appcache/" + id + "/container_")).toList()) {
        modes.put(p.getFileName().toString(), (Integer) Files.getAttribute(p, "unix:mode") & 07777);
      }
    }
    // the executor's container (_000002), as the master's (_000001)
    assertEquals(0710, modes.get(id.toString().replace("application", "container") + "_01_000002"), modes.toString());
    assertEquals(0700, modes.get("launch_container.sh"), modes.toString());
    assertEquals(0700, modes.get("default_container_executor.sh"), modes.toString());
    assertEquals(0644, modes.get("container_tokens"), modes.toString());
  }

  /** The stderr lines of the application's master ({@code _000001}) and executor containers. */
  private static Map<String, List<String>> stderrByContainer(ApplicationId id) throws IOException {
    Map<String, List<String>> lines = new HashMap<>();
    for (Path log : local.containerLogs(id.toString())) {
      if (log.getFileName().toString().equals("stderr")) {
        lines.computeIfAbsent(log.getParent().getFileName().toString().endsWith("_000001") ? "master" : "executor",
            k -> new ArrayList<>()).addAll(Files.readAllLines(log));
      }
    }
    return lines;
  }

  /**
   * {@code muster kill APPID}: YARN kills the master and every container by its process group; the
   * commands, each in a session of its own, end with them (they were left running under init).
   */
  @Test
  void killingTheApplicationEndsEveryCommand() throws Exception {
    YarnJob job = job(GangSpec.workers(2), "echo $$ > " + dir + "/pid-$MUSTER_TASK_INDEX; exec sleep 600", 128, 1,
        Duration.ofMinutes(2));
    ApplicationId id = client.submit(job);
    List<Long> commands = new ArrayList<>();
    for (int i = 0; i < 2; i++) {
      commands.add(Pids.read(dir.resolve("pid-" + i), LIMIT));
    }
    assertTrue(commands.stream().allMatch(Pids::running), "both commands run: " + commands);
    client.kill(id);
    assertEquals(YarnApplicationState.KILLED, client.follow(id, LIMIT, line -> { }).getYarnApplicationState());
    for (long pid : commands) {
      Eventually.within(Duration.ofSeconds(30), "command " + pid + " of the killed application ended",
          () -> !Pids.running(pid));
    }
  }

  @Test
  void yarnEndsAJobThatOutlivesItsApplicationTimeout() throws Exception {
    YarnJob job = job(GangSpec.workers(1), "exec sleep 600", 128, 1, Duration.ofMinutes(2));
    job = job.toBuilder().placement(new YarnJob.Placement(Optional.empty(), Optional.of(Duration.ofSeconds(5))))
        .build();
    ApplicationReport report = client.follow(client.submit(job), LIMIT, line -> { });
    assertEquals(YarnApplicationState.KILLED, report.getYarnApplicationState(), report.getDiagnostics());
    assertTrue(report.getDiagnostics().contains("exceeded the lifetime"), report.getDiagnostics());
  }

  @Test
  void aLostMasterIsStartedAgainByYarnAndItsNewGangCarriesOnWithAHigherAttempt() throws Exception {
    String command = "echo $$ > " + dir + "/pid-$MUSTER_ATTEMPT-$MUSTER_TASK_INDEX; "
        + "echo $MUSTER_ATTEMPT >> " + dir + "/attempts-$MUSTER_TASK_INDEX; "
        + "n=0; while [ ! -f " + dir + "/release ] && [ $n -lt 1200 ]; do sleep 0.1; n=$((n+1)); done";
    ApplicationId id = client.submit(job(GangSpec.workers(2), command, 128, 1, Duration.ofMinutes(2)));
    Eventually.within(Duration.ofSeconds(90), "the first master's gang runs", () ->
        Files.exists(dir.resolve("pid-0-0")) && Files.exists(dir.resolve("pid-0-1")));
    // the master is lost: YARN's administrative "fail this attempt" (yarn applicationattempt -fail) ends it
    try (YarnClient yarn = YarnClient.createYarnClient()) {
      yarn.init(local.configuration());
      yarn.start();
      yarn.failApplicationAttempt(client.report(id).getCurrentApplicationAttemptId());
    }
    Eventually.within(Duration.ofSeconds(120), "the restarted master's gang runs", () ->
        lineCount(dir.resolve("attempts-0")) == 2 && lineCount(dir.resolve("attempts-1")) == 2);
    Files.createFile(dir.resolve("release"));
    ApplicationReport report = client.follow(id, LIMIT, line -> { });

    assertEquals(FinalApplicationStatus.SUCCEEDED, report.getFinalApplicationStatus(), report.getDiagnostics());
    assertTrue(report.getDiagnostics().contains("the master was lost and YARN started it again (master attempt 2)"),
        report.getDiagnostics());
    List<String> attempts = Files.readAllLines(dir.resolve("attempts-0"));
    assertEquals("0", attempts.get(0));
    assertTrue(Integer.parseInt(attempts.get(1)) > 0, "the new gang's MUSTER_ATTEMPT counts on: " + attempts);
    for (int i = 0; i < 2; i++) {
      long pid = Long.parseLong(Files.readString(dir.resolve("pid-0-" + i)).trim());
      Eventually.within(Duration.ofSeconds(30), "the lost master's worker " + i + " has ended", () -> !Pids.running(pid));
    }
  }

  /** Every line the application's containers wrote to their stdout and stderr. */
  private static List<String> containerLines(ApplicationId id) throws java.io.IOException {
    List<String> lines = new ArrayList<>();
    for (Path log : local.containerLogs(id.toString())) {
      lines.addAll(Files.readAllLines(log));
    }
    return lines;
  }

  private static long lineCount(Path file) {
    try {
      return Files.exists(file) ? Files.readAllLines(file).size() : 0;
    } catch (java.io.IOException e) {
      return 0;
    }
  }

  @Test
  void aStagedRuntimeRunsFromTheClustersFileSystemAndIsUploadedOnce() throws Exception {
    try (MusterClient staging = new MusterClient(local.configuration(), true)) {
      YarnJob job = job(GangSpec.workers(1), "echo \"runtime from $(pwd)\"", 128, 1, Duration.ofMinutes(2));
      ApplicationReport first = staging.follow(staging.submit(job), LIMIT, line -> { });
      assertEquals(FinalApplicationStatus.SUCCEEDED, first.getFinalApplicationStatus(), first.getDiagnostics());
      FileSystem fs = FileSystem.get(local.configuration());
      org.apache.hadoop.fs.Path lib = new org.apache.hadoop.fs.Path(fs.getHomeDirectory(), ".muster/lib");
      Map<String, Long> uploaded = new java.util.TreeMap<>();
      for (var status : fs.listStatus(lib)) {
        uploaded.put(status.getPath().getName(), status.getModificationTime());
      }
      assertTrue(uploaded.keySet().stream().anyMatch(n -> n.endsWith("-classes.jar")), "class directories are "
          + "packed into jars: " + uploaded.keySet());

      ApplicationReport second = staging.follow(staging.submit(job), LIMIT, line -> { });
      assertEquals(FinalApplicationStatus.SUCCEEDED, second.getFinalApplicationStatus(), second.getDiagnostics());
      Map<String, Long> after = new java.util.TreeMap<>();
      for (var status : fs.listStatus(lib)) {
        after.put(status.getPath().getName(), status.getModificationTime());
      }
      assertEquals(uploaded, after, "nothing that had not changed was uploaded again");
    }
  }

  /** Headless Chromium (Debian's {@code chromium} package) loads the page while the job runs: every task, its state. */
  @Test
  void theStatusPageRendersInHeadlessChromium() throws Exception {
    Optional<Path> chromium = Stream.of("/usr/bin/chromium", "/usr/bin/chromium-browser").map(Path::of)
        .filter(Files::isExecutable).findFirst();
    org.junit.jupiter.api.Assumptions.assumeTrue(chromium.isPresent(),
        "headless Chromium is not installed here (Debian: apt-get install chromium); the page's HTML and JSON are "
            + "checked without it in theStatusPageListsEveryTaskWithItsStateAndTfConfigWhileTheJobRuns");
    Path release = dir.resolve("release");
    String command = "n=0; while [ ! -f " + release + " ] && [ $n -lt 1200 ]; do sleep 0.1; n=$((n+1)); done";
    ApplicationId id = client.submit(job(GangSpec.of(1, 2, 0, 0), command, 128, 1, Duration.ofMinutes(2)));
    String[] dom = {""};
    Eventually.within(Duration.ofSeconds(120), "Chromium shows the three tasks running", () -> {
      try {
        String url = client.report(id).getOriginalTrackingUrl();
        if (url == null || !url.startsWith("http")) {
          return false;
        }
        Process p = new ProcessBuilder(chromium.get().toString(), "--headless", "--no-sandbox", "--disable-gpu",
            "--dump-dom", url).redirectError(ProcessBuilder.Redirect.DISCARD).start();
        dom[0] = new String(p.getInputStream().readAllBytes(), java.nio.charset.StandardCharsets.UTF_8);
        p.waitFor(60, java.util.concurrent.TimeUnit.SECONDS);
      } catch (Exception e) {
        return false;
      }
      return dom[0].split("<td class=\"state\">running</td>", -1).length - 1 == 3;
    });
    Files.createFile(release);
    assertEquals(FinalApplicationStatus.SUCCEEDED, client.follow(id, LIMIT, line -> { }).getFinalApplicationStatus());
    for (String task : List.of("chief 0", "worker 0", "worker 1")) {
      assertTrue(dom[0].contains("<td>" + task + "</td>"), task + " in " + dom[0]);
    }
    assertTrue(dom[0].contains("state <b id=\"state\">running</b>"), dom[0]);
  }

  /**
   * The one failure rule, with the same command as {@code ExternalCommandTest#theOneFailureRule} on
   * Spark: worker 1 fails the first attempt with {@code code}. A command's own exit code is the
   * job's verdict; 75 (asking for a re-run), or any code under {@code --rerun any-failure}, runs the
   * whole gang again, which then succeeds, each task in the container it had.
   */
  @ParameterizedTest(name = "exit {0} under {1}: re-run {2}")
  @CsvSource({"3, CLUSTER_FAILURES, false", "75, CLUSTER_FAILURES, true", "3, ANY_FAILURE, true"})
  void theOneFailureRule(int code, Rerun rerun, boolean reruns) throws Exception {
    String command = "echo \"$MUSTER_ATTEMPT\" >> " + dir + "/worker-$MUSTER_TASK_INDEX; "
        + "echo \"$CONTAINER_ID\" >> " + dir + "/container-$MUSTER_TASK_INDEX; "
        + "echo \"$MUSTER_WORK_DIR\" > " + dir + "/work-$MUSTER_ATTEMPT-$MUSTER_TASK_INDEX; "
        + "touch \"$MUSTER_WORK_DIR/scratch\"; "
        + "if [ \"$MUSTER_ATTEMPT\" = 1 ] && [ -e \"$(cat " + dir + "/work-0-$MUSTER_TASK_INDEX)\" ]; then "
        + "echo $MUSTER_TASK_INDEX >> " + dir + "/work-left; fi; "
        + "if [ \"$MUSTER_ATTEMPT\" = 0 ] && [ \"$MUSTER_TASK_INDEX\" = 1 ]; then "
        // fails once worker 0's command has run, or it may end the gang before worker 0's starts (10 s at most)
        + "for i in $(seq 100); do [ -s " + dir + "/worker-0 ] && break; sleep 0.1; done; "
        + "echo 'boom from worker 1' >&2; exit " + code + "; fi; "
        + "if [ \"$MUSTER_ATTEMPT\" = 0 ]; then exec sleep 600; fi; exit 0";
    YarnJob job = job(GangSpec.workers(2), command, 128, 2, Duration.ofMinutes(2));
    ApplicationReport report = runToEnd(job.toBuilder().rerun(rerun).build());

    String diagnostics = report.getDiagnostics();
    String failure = "worker 1 on \\S+ \\(container \\S+\\) exited with code " + code
        + "; the last line of its stderr:\n  boom from worker 1";
    if (reruns) {
      assertEquals(FinalApplicationStatus.SUCCEEDED, report.getFinalApplicationStatus(), diagnostics);
      assertTrue(diagnostics.matches("succeeded on attempt 2 of 2; earlier attempts failed:\nattempt 1 of 2 failed: "
          + failure), diagnostics);
      assertEquals("0\n1\n", Files.readString(dir.resolve("worker-0")), "worker 0 ran in both attempts");
      assertEquals("0\n1\n", Files.readString(dir.resolve("worker-1")));
      for (int worker = 0; worker < 2; worker++) {
        List<String> containers = Files.readAllLines(dir.resolve("container-" + worker));
        assertEquals(2, containers.size(), containers.toString());
        assertEquals(containers.get(0), containers.get(1), "worker " + worker + " ran both attempts in one container");
      }
      assertFalse(Files.exists(dir.resolve("work-left")), "each task's directory of attempt 1 was deleted before "
          + "attempt 2 ran in its container");
    } else {
      assertEquals(FinalApplicationStatus.FAILED, report.getFinalApplicationStatus(), diagnostics);
      assertTrue(diagnostics.matches("attempt 1 of 2 failed, not re-run \\(" + Pattern.quote(Rerun.notRerun(
          "--rerun any-failure")) + "\\): " + failure), diagnostics);
      assertEquals("0\n", Files.readString(dir.resolve("worker-0")), "one attempt only");
      assertEquals("0\n", Files.readString(dir.resolve("worker-1")));
    }
  }

  /**
   * A command's own failure that is the symptom of a cluster's failure heard a moment later (as
   * {@code ExternalCommandTest} does on Spark): worker 0 exits 1 at once, worker 1 is killed by a
   * signal a second later. The kill is taken for the cause, and the gang runs again.
   */
  @Test
  void aClustersFailureHeardWithinTheCauseWindowIsTheVerdict() throws Exception {
    String command = "if [ \"$MUSTER_ATTEMPT\" = 0 ]; then "
        + "if [ \"$MUSTER_TASK_INDEX\" = 0 ]; then echo 'lost my peer' >&2; exit 1; fi; sleep 1; kill -9 $$; fi; exit 0";
    ApplicationReport report = runToEnd(job(GangSpec.workers(2), command, 128, 2, Duration.ofMinutes(2)));

    String diagnostics = report.getDiagnostics();
    assertEquals(FinalApplicationStatus.SUCCEEDED, report.getFinalApplicationStatus(), diagnostics);
    assertTrue(diagnostics.matches("succeeded on attempt 2 of 2; earlier attempts failed:\nattempt 1 of 2 failed: "
        + "worker 1 on \\S+ \\(container \\S+\\) exited with code 137 \\(killed by signal 9\\); it wrote nothing to "
        + "stderr"), diagnostics);
  }

  /**
   * With {@value MusterClient#KEEP_CONTAINERS} false, the executors of a failed attempt exit and the
   * next attempt runs in a new gang of containers, as before that key.
   */
  @Test
  void withoutKeepingContainersEveryAttemptRunsInNewContainers() throws Exception {
    org.apache.hadoop.conf.Configuration conf = new org.apache.hadoop.conf.Configuration(local.configuration());
    conf.setBoolean(MusterClient.KEEP_CONTAINERS, false);
    String command = "echo $CONTAINER_ID > " + dir + "/container-$MUSTER_ATTEMPT-$MUSTER_TASK_INDEX; "
        + "if [ \"$MUSTER_ATTEMPT\" = 0 ] && [ \"$MUSTER_TASK_INDEX\" = 1 ]; then exit 75; fi; "
        + "if [ \"$MUSTER_ATTEMPT\" = 0 ]; then exec sleep 600; fi; exit 0";
    try (MusterClient fresh = new MusterClient(conf)) {
      ApplicationReport report = fresh.follow(fresh.submit(job(GangSpec.workers(2), command, 128, 2,
          Duration.ofMinutes(2))), LIMIT, line -> { });

      assertEquals(FinalApplicationStatus.SUCCEEDED, report.getFinalApplicationStatus(), report.getDiagnostics());
      for (int worker = 0; worker < 2; worker++) {
        assertNotEquals(Files.readString(dir.resolve("container-0-" + worker)),
            Files.readString(dir.resolve("container-1-" + worker)), "worker " + worker + " got a new container");
      }
    }
  }

  /**
   * Worker 1's executor stops answering (SIGSTOP, as a hung or swapped-out JVM would; its NodeManager
   * still answers) while its command runs; four seconds later worker 0 fails, as the peer of a task
   * cut off would. The master takes the silence for the cause: the attempt does not count, and the
   * whole gang runs again.
   */
  @Test
  void anExecutorThatGoesSilentEndsTheAttemptUncountedAndTheSilentTasksCommandIsStopped() throws Exception {
    String command = "echo $$ > " + dir + "/pid-$MUSTER_ATTEMPT-$MUSTER_TASK_INDEX; "
        + "echo $CONTAINER_ID > " + dir + "/container-$MUSTER_ATTEMPT-$MUSTER_TASK_INDEX; "
        + "if [ \"$MUSTER_ATTEMPT\" = 0 ]; then "
        + "n=0; while [ ! -f " + dir + "/stopped ] && [ $n -lt 1200 ]; do sleep 0.1; n=$((n+1)); done; "
        + "if [ \"$MUSTER_TASK_INDEX\" = 0 ]; then sleep 4; echo 'lost my peer' >&2; exit 1; fi; exec sleep 600; fi; "
        + "exit 0";
    ApplicationId id = client.submit(job(GangSpec.workers(2), command, 128, 1, Duration.ofMinutes(2)));
    long worker1 = Pids.read(dir.resolve("pid-0-1"), Duration.ofSeconds(90));
    ProcessHandle executor = ProcessHandle.of(worker1).orElseThrow();
    // its command line from /proc: ProcessHandle's stops at 4096 characters, inside the class path
    while (!Files.readString(Path.of("/proc", Long.toString(executor.pid()), "cmdline"))
        .contains(TaskExecutor.class.getName())) {
      executor = executor.parent().orElseThrow(() -> new AssertionError("no TaskExecutor above pid " + worker1));
    }
    signal("STOP", executor.pid());
    try {
      Files.createFile(dir.resolve("stopped"));
      ApplicationReport report = client.follow(id, LIMIT, line -> { });

      assertEquals(FinalApplicationStatus.SUCCEEDED, report.getFinalApplicationStatus(), report.getDiagnostics());
      String diagnostics = report.getDiagnostics();
      java.util.regex.Matcher m = java.util.regex.Pattern.compile("succeeded on attempt 2 \\(1 of 1 that count\\); "
          + "earlier attempts failed:\nattempt 1 of 1 failed: worker 1 on (\\S+) \\(container \\S+\\) went silent: no word "
          + "from it for (\\d+) s; its NodeManager at \\1:\\d+: answers; after it, worker 0 on \\1 \\(container "
          + "\\S+\\) exited with code 1; the last line of its stderr:\n  lost my peer \\(an executor went silent; this "
          + "attempt does not count\\)").matcher(diagnostics);
      assertTrue(m.matches(), diagnostics);
      assertTrue(Integer.parseInt(m.group(2)) >= 3, "worker 1 was silent when worker 0 failed: " + diagnostics);
      assertTrue(Files.exists(dir.resolve("pid-1-0")) && Files.exists(dir.resolve("pid-1-1")), "the gang ran again");
      assertEquals(Files.readString(dir.resolve("container-0-0")), Files.readString(dir.resolve("container-1-0")),
          "worker 0's executor offered its container, which ran worker 0 again");
      assertNotEquals(Files.readString(dir.resolve("container-0-1")), Files.readString(dir.resolve("container-1-1")),
          "the silent executor's container was stopped: worker 1 ran in a new one");
      Eventually.within(Duration.ofSeconds(30), "the silent worker's command has ended", () -> !Pids.running(worker1));
    } finally {
      if (executor.isAlive()) {
        signal("CONT", executor.pid());
      }
    }
  }

  private static void signal(String signal, long pid) throws Exception {
    assertEquals(0, new ProcessBuilder("kill", "-" + signal, Long.toString(pid)).inheritIO().start().waitFor());
  }

  @Test
  void aGangTheClusterCouldNeverHoldIsRefusedAtSubmissionWithTheFigures() throws Exception {
    Map<YarnJob, String> cases = Map.of(
        job(GangSpec.workers(1), "exit 0", 16384, 1, Duration.ofSeconds(5)),
        "the worker containers ask for 16384 MB and 1 vcore, more than the cluster's largest container (8192 MB, 4 "
            + "vcores: yarn.scheduler.maximum-allocation-mb and -vcores, or its largest node's where smaller); ask for less "
            + "(--worker-memory, --worker-vcores)",
        job(GangSpec.workers(1), "exit 0", 6144, 1, Duration.ofSeconds(5)),
        "the worker containers ask for 6144 MB and 1 vcore, more than any of the 2 running nodes has (the largest: "
            + "4096 MB, 8 vcores); ask for less (--worker-memory, --worker-vcores)",
        job(GangSpec.workers(3), "exit 0", 3072, 1, Duration.ofSeconds(5)),
        "the gang's containers and its master need 9728 MB at once, more than the 2 running "
            + "nodes have together (8192 MB); ask for fewer or smaller containers");
    int before = local.yarn().getResourceManager().getRMContext().getRMApps().size();
    for (Map.Entry<YarnJob, String> c : cases.entrySet()) {
      IllegalStateException e = assertThrows(IllegalStateException.class, () -> client.submit(c.getKey()));
      assertEquals(c.getValue(), e.getMessage());
    }
    assertEquals(before, local.yarn().getResourceManager().getRMContext().getRMApps().size(), "nothing was submitted");
  }

  @Test
  void aGangThatCannotFitFailsAtTheGangDeadlineSayingWhatIsMissing() throws Exception {
    // two NodeManagers of 4096 MB, one also running the 512 MB master: the gang and its master (8192 MB) are no
    // more than the nodes together, but only two 2560 MB workers fit on them
    Instant start = Instant.now();
    ApplicationReport report = runToEnd(job(GangSpec.workers(3), "exit 0", 2560, 3, Duration.ofSeconds(5)));
    Duration took = Duration.between(start, Instant.now());

    assertEquals(FinalApplicationStatus.FAILED, report.getFinalApplicationStatus());
    String diagnostics = report.getDiagnostics();
    assertTrue(diagnostics.startsWith("attempt 1 of 3: the gang was not formed within the gang timeout of 5 s: "
        + "worker 2/3 allocated, "), diagnostics);
    assertTrue(diagnostics.contains("missing: ") && diagnostics.endsWith("worker 2 (no container)"), diagnostics);
    assertFalse(diagnostics.contains("attempt 2"), "a gang that does not fit is not tried again: " + diagnostics);
    assertTrue(took.compareTo(Duration.ofSeconds(5 + 60)) < 0, "failed " + took + " after submission (a hang guard, "
        + "not a speed claim)");
    Eventually.within(Duration.ofSeconds(30), "every container is released", () ->
        local.yarn().getResourceManager().getResourceScheduler().getRootQueueMetrics().getAllocatedMB() == 0);
  }
}
