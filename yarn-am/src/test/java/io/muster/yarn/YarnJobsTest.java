package io.muster.yarn;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.muster.cluster.TaskType;
import io.muster.cluster.TfConfig;
import io.muster.launch.GangSpec;
import io.muster.testing.Eventually;
import io.muster.testing.Pids;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.EnumMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import org.apache.hadoop.yarn.api.records.ApplicationId;
import org.apache.hadoop.yarn.api.records.ApplicationReport;
import org.apache.hadoop.yarn.api.records.FinalApplicationStatus;
import org.apache.hadoop.yarn.conf.YarnConfiguration;
import org.apache.hadoop.yarn.server.MiniYARNCluster;
import org.apache.hadoop.yarn.server.resourcemanager.scheduler.fifo.FifoScheduler;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** Muster's client, ApplicationMaster and task executors on a MiniYARNCluster of two NodeManagers. */
class YarnJobsTest {

  private static final Duration LIMIT = Duration.ofMinutes(3);
  private static MiniYARNCluster yarn;
  private static MusterClient client;

  @TempDir Path dir;

  @BeforeAll
  static void start() {
    YarnConfiguration conf = new YarnConfiguration();
    conf.setClass(YarnConfiguration.RM_SCHEDULER, FifoScheduler.class, Object.class);
    conf.setInt(YarnConfiguration.RM_SCHEDULER_MINIMUM_ALLOCATION_MB, 128);
    conf.setInt(YarnConfiguration.NM_PMEM_MB, 2048);
    conf.setInt(YarnConfiguration.YARN_MINICLUSTER_NM_PMEM_MB, 2048); // MiniYARNCluster's own, 4096 by default
    conf.setBoolean(YarnConfiguration.NM_VMEM_CHECK_ENABLED, false);
    conf.setBoolean(YarnConfiguration.NM_PMEM_CHECK_ENABLED, false);
    conf.set(YarnConfiguration.NM_DISK_HEALTH_CHECK_ENABLE, "false");
    conf.setFloat(YarnConfiguration.NM_MAX_PER_DISK_UTILIZATION_PERCENTAGE, 99.9f);
    conf.set("yarn.nodemanager.webapp.address", "127.0.0.1:0");
    conf.set("yarn.resourcemanager.webapp.address", "127.0.0.1:0");
    conf.set("yarn.timeline-service.enabled", "false");
    conf.setLong("yarn.nodemanager.sleep-delay-before-sigkill.ms", 100);
    conf.setLong("yarn.nodemanager.process-kill-wait.ms", 100);
    conf.setLong("yarn.nodemanager.log.retain-seconds", 0);
    conf.setLong("yarn.nodemanager.delete.debug-delay-sec", 0);
    yarn = new MiniYARNCluster("muster", 2, 1, 1);
    yarn.init(conf);
    yarn.start();
    client = new MusterClient(yarn.getConfig());
  }

  @AfterAll
  static void stop() throws Exception {
    client.close();
    yarn.stop();
  }

  private static YarnJob job(GangSpec gang, String command, int memoryMb, int maxAttempts, Duration gangTimeout) {
    Map<TaskType, YarnJob.Resources> resources = new EnumMap<>(TaskType.class);
    Map<TaskType, String> commands = new EnumMap<>(TaskType.class);
    for (TaskType type : YarnJob.typesOf(gang)) {
      resources.put(type, new YarnJob.Resources(memoryMb, 1, 0));
      commands.put(type, command);
    }
    return new YarnJob("muster-test", "default", gang, resources, commands, Map.of("GREETING", "hello"),
        maxAttempts, gangTimeout, Optional.of("file:///tmp/muster-test-out"),
        List.of(System.getProperty("java.class.path").split(":")));
  }

  private static ApplicationReport runToEnd(YarnJob job) throws Exception {
    ApplicationId id = client.submit(job);
    List<String> progress = new ArrayList<>();
    ApplicationReport report = client.follow(id, LIMIT, progress::add);
    assertTrue(Set.of(FinalApplicationStatus.SUCCEEDED, FinalApplicationStatus.FAILED)
        .contains(report.getFinalApplicationStatus()), "the job ended within " + LIMIT + ": " + progress);
    return report;
  }

  @Test
  void aParameterServerGangSucceedsWithTheChiefAndItsServingTasksAreEnded() throws Exception {
    // every task leaves its TF_CONFIG and pid; the chief waits for all four, then exits 0
    String command = "printf '%s' \"$TF_CONFIG\" > " + dir + "/tf-$MUSTER_TASK_TYPE-$MUSTER_TASK_INDEX; "
        + "echo $$ > " + dir + "/pid-$MUSTER_TASK_TYPE-$MUSTER_TASK_INDEX; "
        + "echo \"$GREETING $MUSTER_NUM_WORKERS $MUSTER_IS_CHIEF $MUSTER_OUTPUT_DIR\" > " + dir
        + "/env-$MUSTER_TASK_TYPE-$MUSTER_TASK_INDEX; "
        + "if [ \"$MUSTER_TASK_TYPE\" = chief ]; then "
        + "n=0; while [ $(ls " + dir + " | grep -c '^pid-') -lt 4 ] && [ $n -lt 600 ]; do sleep 0.1; n=$((n+1)); done; "
        + "exit 0; fi; exec sleep 600";
    ApplicationReport report = runToEnd(job(GangSpec.of(1, 2, 1, 0), command, 128, 1, Duration.ofMinutes(2)));

    assertEquals(FinalApplicationStatus.SUCCEEDED, report.getFinalApplicationStatus(), report.getDiagnostics());
    assertEquals("succeeded on attempt 1 of 1", report.getDiagnostics());
    TfConfig chief = TfConfig.parse(Files.readString(dir.resolve("tf-chief-0")));
    assertEquals(Set.of("chief", "worker", "ps"), chief.cluster().jobs());
    assertEquals(4, chief.cluster().allTasks().size());
    for (String task : List.of("chief-0", "worker-0", "worker-1", "ps-0")) {
      TfConfig config = TfConfig.parse(Files.readString(dir.resolve("tf-" + task)));
      assertEquals(chief.cluster(), config.cluster(), task + " sees the same cluster");
      assertEquals(task.replace('-', ' '), config.requireTask().toString());
      long pid = Long.parseLong(Files.readString(dir.resolve("pid-" + task)).trim());
      Eventually.within(Duration.ofSeconds(30), task + "'s command has ended", () -> !Pids.running(pid));
    }
    assertEquals("hello 3 true file:///tmp/muster-test-out", Files.readString(dir.resolve("env-chief-0")).trim());
    assertEquals("hello 3 false file:///tmp/muster-test-out", Files.readString(dir.resolve("env-ps-0")).trim());
  }

  @Test
  void aWorkerThatFailsOnTheFirstAttemptRestartsTheWholeGangWhichThenSucceeds() throws Exception {
    String command = "echo \"$MUSTER_ATTEMPT\" >> " + dir + "/attempts-$MUSTER_TASK_TYPE-$MUSTER_TASK_INDEX; "
        + "if [ \"$MUSTER_ATTEMPT\" = 0 ] && [ \"$MUSTER_TASK_INDEX\" = 1 ]; then "
        + "echo 'boom from worker 1' >&2; exit 3; fi; "
        + "if [ \"$MUSTER_ATTEMPT\" = 0 ]; then exec sleep 600; fi; exit 0";
    ApplicationReport report = runToEnd(job(GangSpec.workers(2), command, 128, 2, Duration.ofMinutes(2)));

    assertEquals(FinalApplicationStatus.SUCCEEDED, report.getFinalApplicationStatus(), report.getDiagnostics());
    String diagnostics = report.getDiagnostics();
    assertTrue(diagnostics.startsWith("succeeded on attempt 2 of 2; earlier attempts failed:\nattempt 1 of 2 failed: "
        + "worker 1 on "), diagnostics);
    assertTrue(diagnostics.contains("exited with code 3; the last 1 lines of its stderr:\n  boom from worker 1"),
        diagnostics);
    assertEquals("0\n1\n", Files.readString(dir.resolve("attempts-worker-0")), "worker 0 ran in both attempts");
    assertEquals("0\n1\n", Files.readString(dir.resolve("attempts-worker-1")));
  }

  @Test
  void aGangThatCannotFitFailsAtTheGangDeadlineSayingWhatIsMissing() throws Exception {
    // two NodeManagers of 2048 MB, one also running the 512 MB master: two 1536 MB workers fit, three do not
    Instant start = Instant.now();
    ApplicationReport report = runToEnd(job(GangSpec.workers(3), "exit 0", 1536, 3, Duration.ofSeconds(5)));
    Duration took = Duration.between(start, Instant.now());

    assertEquals(FinalApplicationStatus.FAILED, report.getFinalApplicationStatus());
    String diagnostics = report.getDiagnostics();
    assertTrue(diagnostics.startsWith("attempt 1 of 3: the gang was not formed within the gang timeout of PT5S: "
        + "worker 2/3 allocated, "), diagnostics);
    assertTrue(diagnostics.contains("missing: ") && diagnostics.endsWith("worker 2 (no container)"), diagnostics);
    assertFalse(diagnostics.contains("attempt 2"), "a gang that does not fit is not tried again: " + diagnostics);
    assertTrue(took.compareTo(Duration.ofSeconds(5 + 60)) < 0, "failed " + took + " after submission (a hang guard, "
        + "not a speed claim)");
    Eventually.within(Duration.ofSeconds(30), "every container is released", () ->
        yarn.getResourceManager().getResourceScheduler().getRootQueueMetrics().getAllocatedMB() == 0);
  }
}
