package io.muster.yarn;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.muster.cluster.TaskType;
import io.muster.launch.GangSpec;
import io.muster.testing.Eventually;
import io.muster.testing.Pids;
import io.muster.yarn.local.LocalYarn;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.EnumMap;
import java.util.List;
import java.util.Map;
import java.util.stream.Stream;
import org.apache.hadoop.yarn.api.records.ApplicationId;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The ResourceManager goes away while a job runs and its NodeManagers stay (they wait for it, as a
 * real cluster's do): the master gives up within its bound (LocalYarn's 10 s of retries) and ends,
 * and so does every command of its gang.
 */
class LostResourceManagerTest {

  private static final Duration LIMIT = Duration.ofMinutes(2);

  @Test
  void theMasterAndItsGangEndWhenTheResourceManagerIsGone(@TempDir Path dir) throws Exception {
    try (LocalYarn local = LocalYarn.start(Path.of("target", "local-yarn-" + getClass().getSimpleName()));
        MusterClient client = new MusterClient(local.configuration())) {
      GangSpec gang = GangSpec.workers(2);
      Map<TaskType, YarnJob.Resources> resources = new EnumMap<>(TaskType.class);
      resources.put(TaskType.WORKER, new YarnJob.Resources(128, 1, 0));
      YarnJob job = YarnJob.builder().name("muster-test").gang(gang).resources(resources)
          .command("echo $$ > " + dir + "/pid-$MUSTER_TASK_INDEX; exec sleep 600").gangTimeout(Duration.ofMinutes(2))
          .classpath(List.of(System.getProperty("java.class.path").split(":"))).build();
      ApplicationId id = client.submit(job);
      List<Long> commands = new ArrayList<>();
      for (int i = 0; i < 2; i++) {
        commands.add(Pids.read(dir.resolve("pid-" + i), LIMIT));
      }
      long master = masterPid(id);

      local.yarn().getResourceManager().stop();
      Eventually.within(Duration.ofSeconds(60), "the master (pid " + master + ") has ended", () -> !Pids.running(master));
      Eventually.within(Duration.ofSeconds(30), "every command of the gang has ended",
          () -> commands.stream().noneMatch(Pids::running));
      String masterLog = Files.readString(local.containerLogs(id.toString()).stream()
          .filter(p -> p.getParent().getFileName().toString().endsWith("_000001") && p.endsWith("stderr"))
          .findFirst().orElseThrow());
      assertTrue(masterLog.contains("lost the ResourceManager: no answer within 10 s"), masterLog);
      assertTrue(masterLog.contains("ending the job's containers and exiting"), masterLog);
    }
  }

  @Test
  void theMastersBoundIsAMinuteUnlessTheClusterSetsOne() {
    String maxWait = org.apache.hadoop.yarn.conf.YarnConfiguration.RESOURCEMANAGER_CONNECT_MAX_WAIT_MS;
    org.apache.hadoop.conf.Configuration defaults = new org.apache.hadoop.yarn.conf.YarnConfiguration();
    assertEquals(900_000, defaults.getLong(maxWait, 0), "YARN's own default: 15 minutes");
    assertEquals(60_000, ResourceManagerLink.clientConfiguration(defaults).getLong(maxWait, 0));
    org.apache.hadoop.conf.Configuration set = new org.apache.hadoop.yarn.conf.YarnConfiguration();
    set.setLong(maxWait, 300_000);
    assertEquals(300_000, ResourceManagerLink.clientConfiguration(set).getLong(maxWait, 0),
        "the cluster's own setting stands");
  }

  /** The ApplicationMaster's process: the JVM running its class for this application. */
  private static long masterPid(ApplicationId id) throws IOException {
    List<Long> found = new ArrayList<>();
    try (Stream<Path> procs = Files.list(Path.of("/proc"))) {
      for (Path proc : procs.filter(p -> p.getFileName().toString().matches("\\d+")).toList()) {
        try {
          List<String> argv = List.of(new String(Files.readAllBytes(proc.resolve("cmdline"))).split("\0"));
          String env = new String(Files.readAllBytes(proc.resolve("environ"))).replace('\0', ' ');
          // the JVM itself, not the shell YARN starts it with
          if (argv.get(0).endsWith("/java") && argv.contains(ApplicationMaster.class.getName())
              && env.contains(id.toString())) {
            found.add(Long.parseLong(proc.getFileName().toString()));
          }
        } catch (IOException e) {
          // ended meanwhile
        }
      }
    }
    assertEquals(1, found.size(), "one master of " + id + ": " + found);
    return found.get(0);
  }
}
