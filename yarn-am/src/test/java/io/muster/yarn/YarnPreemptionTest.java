package io.muster.yarn;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.muster.cluster.TaskType;
import io.muster.launch.GangSpec;
import io.muster.testing.Eventually;
import io.muster.testing.PythonTensorFlow;
import io.muster.yarn.local.LocalYarn;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.EnumMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.function.Predicate;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.yarn.api.records.ApplicationId;
import org.apache.hadoop.yarn.api.records.ApplicationReport;
import org.apache.hadoop.yarn.api.records.FinalApplicationStatus;
import org.apache.hadoop.yarn.conf.YarnConfiguration;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Preemption on {@link LocalYarn} run by the capacity scheduler: queues {@code a} and {@code b},
 * half the cluster each, either may take all of it while the other does not need it, and the
 * preemption monitor takes back what a queue is owed. A Muster gang runs over its share in
 * {@code a}; another job claims {@code b}'s; YARN announces it will take one of the gang's
 * containers, and kills it after {@value #GRACE_MS} ms.
 */
class YarnPreemptionTest {

  private static final Duration LIMIT = Duration.ofMinutes(3);
  /** How long YARN waits between its preemption notice and the kill ({@code max_wait_before_kill}). */
  private static final long GRACE_MS = 8000;
  /** Each gang container: two fit the cluster beside the masters, and a third (the other queue's) only by preemption. */
  private static final int CONTAINER_MB = 3000;
  private static LocalYarn local;
  private static MusterClient client;

  @BeforeAll
  static void start() throws Exception {
    Configuration settings = new Configuration(false);
    settings.set(YarnConfiguration.RM_SCHEDULER,
        "org.apache.hadoop.yarn.server.resourcemanager.scheduler.capacity.CapacityScheduler");
    String root = "yarn.scheduler.capacity.root.";
    settings.set(root + "queues", "a,b");
    for (String queue : List.of("a", "b")) {
      settings.set(root + queue + ".capacity", "50");
      settings.set(root + queue + ".maximum-capacity", "100");
      settings.set(root + queue + ".user-limit-factor", "100");
    }
    settings.set("yarn.scheduler.capacity.maximum-am-resource-percent", "0.5");
    settings.setBoolean(YarnConfiguration.RM_SCHEDULER_ENABLE_MONITORS, true);
    String preemption = "yarn.resourcemanager.monitor.capacity.preemption.";
    settings.set(preemption + "monitoring_interval", "500");
    settings.set(preemption + "max_wait_before_kill", String.valueOf(GRACE_MS));
    settings.set(preemption + "total_preemption_per_round", "1.0");
    settings.set(preemption + "natural_termination_factor", "1.0");
    local = LocalYarn.start(Path.of("target", "local-yarn-" + YarnPreemptionTest.class.getSimpleName()), false,
        settings);
    client = new MusterClient(local.configuration());
  }

  @AfterAll
  static void stop() throws Exception {
    client.close();
    local.close();
  }

  private static YarnJob job(String queue, GangSpec gang, String command, Optional<String> outputDir) {
    return job(queue, gang, command, outputDir, Map.of());
  }

  private static YarnJob job(String queue, GangSpec gang, String command, Optional<String> outputDir,
      Map<String, String> environment) {
    Map<TaskType, YarnJob.Resources> resources = new EnumMap<>(TaskType.class);
    for (TaskType type : gang.types()) {
      resources.put(type, new YarnJob.Resources(CONTAINER_MB, 1, 0));
    }
    return YarnJob.builder().name("muster-preemption-test").queue(queue).gang(gang).resources(resources)
        .command(command).environment(environment).gangTimeout(Duration.ofMinutes(2)).outputDir(outputDir.orElse(null))
        .classpath(List.of(System.getProperty("java.class.path").split(":"))).build();
  }

  private static String javaWorker(String... args) {
    return Path.of(System.getProperty("java.home"), "bin", "java") + " -Xmx128m -cp "
        + System.getProperty("java.class.path") + " " + YarnJavaWorker.class.getName() + " " + String.join(" ", args);
  }

  private static List<String> containerLines(ApplicationId id) throws java.io.IOException {
    List<String> lines = new ArrayList<>();
    for (Path log : local.containerLogs(id.toString())) {
      lines.addAll(Files.readAllLines(log));
    }
    return lines;
  }

  /**
   * The Java runtime's gang saves at the step it agrees on when YARN announces the preemption, and
   * leaves; once the other queue's job is done the gang runs again, resumes at that step, and ends
   * with the weights of an uninterrupted run. The attempt does not count against the job's one.
   */
  @Test
  void aPreemptedJavaGangSavesAtAnAgreedStepResumesThereAndEndsAsAnUninterruptedRun() throws Exception {
    String hdfs = local.configuration().get("fs.defaultFS");
    GangSpec gang = GangSpec.of(1, 1, 0, 0);
    List<String> expected = uninterruptedWeights(job("a", gang, javaWorker("preemptible", "0"),
        Optional.of(hdfs + "/jobs/uninterrupted")));

    ApplicationId id = client.submit(job("a", gang, javaWorker("preemptible", "150"),
        Optional.of(hdfs + "/jobs/preempted")));
    // 2 s into its training (4 epochs of 20 steps of 150 ms), once both tasks' strategies have joined (their
    // first line), the other queue claims its share
    ApplicationReport report = preempted(id, "both tasks of attempt 1 train",
        progress -> linesSoFar(id).stream().filter(l -> l.startsWith("attempt 0 starts at epoch")).count() == 2,
        Duration.ofSeconds(2), "sleep 8").report();

    String diagnostics = report.getDiagnostics();
    assertEquals(FinalApplicationStatus.SUCCEEDED, report.getFinalApplicationStatus(), diagnostics);
    assertTrue(diagnostics.matches("(?s)succeeded on attempt 2 \\(1 of 1 that count\\) after 1 preemption; every task "
        + "saved; earlier attempts were preempted:\nattempt 1 of 1 preempted: preemption notice for (chief|worker) 0 "
        + "\\(container \\S+ on \\S+\\); every task saved \\(exit code 42\\) \\(this attempt does not count\\)"),
        diagnostics);

    List<String> lines = containerLines(id);
    List<String> saved = lines.stream().filter(l -> l.startsWith("preempted: saved after step ")).distinct().toList();
    assertEquals(1, saved.size(), "both tasks saved at one step: " + saved);
    Matcher at = Pattern.compile("preempted: saved after step (\\d+) of epoch (\\d+) .*").matcher(saved.get(0));
    assertTrue(at.matches(), saved.get(0));
    int step = Integer.parseInt(at.group(1));
    int epoch = Integer.parseInt(at.group(2));
    String resumed = step == 20 ? "attempt 1 starts at epoch " + epoch
        : "attempt 1 starts at epoch " + (epoch - 1) + " step " + step;
    assertEquals(2, lines.stream().filter(resumed::equals).count(), "both resumed where they saved, '" + resumed
        + "': " + lines.stream().filter(l -> l.startsWith("attempt")).toList());
    assertEquals(expected, weights(lines), "the weights of the uninterrupted run");
  }

  /**
   * A command that ignores the notice is killed when YARN's wait is over; the attempt still does not
   * count, the report says who did not save, and the next attempt runs.
   */
  @Test
  void aCommandThatIgnoresTheNoticeIsKilledByYarnAndTheAttemptStillDoesNotCount() throws Exception {
    ApplicationId id = client.submit(job("a", GangSpec.workers(2), "trap '' TERM; echo \"attempt $MUSTER_ATTEMPT "
        + "ran\"; if [ \"$MUSTER_ATTEMPT\" = 0 ]; then exec sleep 600; fi", Optional.empty()));
    ApplicationReport report = preempted(id, "the gang of attempt 1 runs",
        progress -> progress.stream().anyMatch(l -> l.contains("attempt 1: 2 workers running")), Duration.ZERO,
        "sleep 2").report();

    String diagnostics = report.getDiagnostics();
    assertEquals(FinalApplicationStatus.SUCCEEDED, report.getFinalApplicationStatus(), diagnostics);
    assertTrue(diagnostics.startsWith("succeeded on attempt 2 (1 of 1 that count) after 1 preemption; every task "
        + "saved in 0 of them; earlier attempts were preempted:\nattempt 1 of 1 preempted: preemption notice for "
        + "worker "), diagnostics);
    assertTrue(diagnostics.matches("(?s).*; not saved by .*worker [01] \\(exited with code -102; .*exit status "
        + "-102.*: the next attempt resumes from the last backup \\(this attempt does not count\\)"), diagnostics);
    assertTrue(containerLines(id).containsAll(List.of("attempt 0 ran", "attempt 1 ran")));
  }

  /** The container logs' lines so far; none where a log is being written or moved as it is read. */
  private static List<String> linesSoFar(ApplicationId id) {
    try {
      return containerLines(id);
    } catch (java.io.IOException | java.io.UncheckedIOException e) {
      return List.of();
    }
  }

  /**
   * Real TensorFlow's own answer: {@code PreemptionCheckpointHandler} saves on the SIGTERM the
   * executors pass on, at a step the workers agree on through TensorFlow's coordination service, and
   * exits with 42; the next attempt's handler restores there. No step is trained twice, and the
   * weights are an uninterrupted run's.
   */
  @Test
  void realTensorFlowsPreemptionCheckpointHandlerSavesOnTheNoticeAndTheNextAttemptResumesThere(@TempDir Path dir)
      throws Exception {
    Path python = PythonTensorFlow.python();
    Path script = PythonTensorFlow.script("preemption_train.py", dir);
    // The handler asks the GCE metadata server whether it runs on Google's cloud: a closed port on
    // the loopback says no at once, and the test talks to nothing beyond this machine.
    Map<String, String> environment = Map.of("GCE_METADATA_IP", "127.0.0.1:1", "TF_CPP_MIN_LOG_LEVEL", "2");
    GangSpec gang = GangSpec.of(1, 1, 0, 0);
    List<String> expected = uninterruptedWeights(job("a", gang, python + " " + script + " 0",
        Optional.of(dir.resolve("uninterrupted").toString()), environment));

    ApplicationId id = client.submit(job("a", gang, python + " " + script + " 0.2",
        Optional.of(dir.resolve("preempted").toString()), environment));
    // into its training, with the handler installed: a SIGTERM before then would end the process
    Preempted run = preempted(id, "both tasks trained 5 steps",
        progress -> linesSoFar(id).stream().filter(l -> l.equals("step 5 done")).count() == 2, Duration.ZERO, "sleep 8");
    ApplicationReport report = run.report();
    List<String> progress = run.progress();

    String diagnostics = report.getDiagnostics();
    assertEquals(FinalApplicationStatus.SUCCEEDED, report.getFinalApplicationStatus(), diagnostics);
    assertTrue(diagnostics.matches("(?s)succeeded on attempt 2 \\(1 of 1 that count\\) after 1 preemption; every task "
        + "saved; .*every task saved \\(exit code 42\\) \\(this attempt does not count\\)"), diagnostics);
    assertTrue(progress.stream().anyMatch(line -> line.matches("\\S+ attempt 1: .*; preemption notice for (chief|worker) 0 "
        + "\\(container \\S+ on \\S+\\): saving")), "the submitter heard of the notice while the gang saved: " + progress);
    List<String> lines = containerLines(id);
    List<String> resumed = lines.stream().filter(l -> l.startsWith("attempt 1 starts at step ")).distinct().toList();
    assertEquals(1, resumed.size(), "both tasks resumed at one step: " + resumed);
    int savedAt = Integer.parseInt(resumed.get(0).substring("attempt 1 starts at step ".length()));
    // the steps attempt 1 trains again: none, where the epoch backup alone would repeat the epoch's
    int lastDoneBefore = 0;
    for (Path log : local.containerLogs(id.toString())) {
      List<String> own = Files.readAllLines(log);
      if (own.contains("attempt 0 starts at step 0")) { // up to attempt 1's start, where the container ran it too
        lastDoneBefore = Math.max(lastDoneBefore, own.stream().takeWhile(l -> !l.startsWith("attempt 1 starts"))
            .filter(l -> l.matches("step \\d+ done")).mapToInt(l -> Integer.parseInt(l.split(" ")[1])).max().orElse(0));
      }
    }
    assertTrue(savedAt > 5 && savedAt < 80, "saved mid-run: " + resumed);
    assertEquals(lastDoneBefore, savedAt, "no step done before the save is trained again");
    assertEquals(expected, weights(lines), "the weights of the uninterrupted run");
  }

  /** Runs {@code job} to its end, which must be success; the weights' digests its chief and worker printed. */
  private static List<String> uninterruptedWeights(YarnJob job) throws Exception {
    ApplicationId id = client.submit(job);
    ApplicationReport report = client.follow(id, LIMIT, line -> { });
    assertEquals(FinalApplicationStatus.SUCCEEDED, report.getFinalApplicationStatus(), report.getDiagnostics());
    List<String> weights = weights(containerLines(id));
    assertEquals(2, weights.size(), "chief and worker printed their weights: " + containerLines(id));
    return weights;
  }

  /** A preempted job's final report, and the submitter's progress lines while it ran. */
  private record Preempted(ApplicationReport report, List<String> progress) {}

  /**
   * Follows job {@code id} (in queue a) to its end while, once {@code ready} holds of its progress
   * lines and {@code settle} has passed, a one-worker job in queue b claims b's share, running
   * {@code otherCommand}, which must succeed.
   */
  private static Preempted preempted(ApplicationId id, String readiness, Predicate<List<String>> ready,
      Duration settle, String otherCommand) throws Exception {
    List<String> progress = new CopyOnWriteArrayList<>();
    CompletableFuture<ApplicationReport> followed = CompletableFuture.supplyAsync(() -> {
      try {
        return client.follow(id, LIMIT, progress::add);
      } catch (Exception e) {
        throw new IllegalStateException(e);
      }
    });
    Eventually.within(LIMIT, readiness, () -> ready.test(progress));
    Thread.sleep(settle.toMillis());
    ApplicationId other = client.submit(job("b", GangSpec.workers(1), otherCommand, Optional.empty()));
    ApplicationReport report = followed.get();
    ApplicationReport otherReport = client.follow(other, LIMIT, line -> { });
    assertEquals(FinalApplicationStatus.SUCCEEDED, otherReport.getFinalApplicationStatus(), otherReport.getDiagnostics());
    return new Preempted(report, progress);
  }

  private static List<String> weights(List<String> lines) {
    return lines.stream().filter(l -> l.startsWith("weights-sha256 ")).sorted().toList();
  }
}
