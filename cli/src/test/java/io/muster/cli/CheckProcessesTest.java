package io.muster.cli;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.muster.cluster.ClusterSpec;
import io.muster.cluster.TaskId;
import io.muster.cluster.TfConfig;
import io.muster.testing.ChildJvm;
import java.net.ServerSocket;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/** {@code muster check} in four child JVMs sharing one TF_CONFIG cluster on 127.0.0.1. */
class CheckProcessesTest {

  private static final Path LOGS = Path.of("target", "check-logs");

  private static ClusterSpec fourWorkers() throws Exception {
    List<String> addresses = new ArrayList<>();
    for (int i = 0; i < 4; i++) {
      try (ServerSocket free = new ServerSocket(0)) {
        addresses.add("127.0.0.1:" + free.getLocalPort());
      }
    }
    return ClusterSpec.of(Map.of("worker", addresses));
  }

  private static ChildJvm check(String name, ClusterSpec cluster, int index, String timeout) {
    return ChildJvm.start(name + "-worker-" + index, Muster.class, List.of("check", "--timeout", timeout),
        Map.of("TF_CONFIG", TfConfig.of(cluster, new TaskId("worker", index)).toJson(),
            "MUSTER_JOB_TOKEN", "check-test-token"), LOGS);
  }

  @Test
  void fourTasksAllJoinAndExitZero() throws Exception {
    ClusterSpec cluster = fourWorkers();
    List<ChildJvm> tasks = new ArrayList<>();
    try {
      for (int i = 0; i < 4; i++) {
        tasks.add(check("all", cluster, i, "60s"));
      }
      for (ChildJvm task : tasks) {
        assertEquals(0, task.waitFor(Duration.ofSeconds(90)), task.output());
        String out = task.output();
        for (int i = 0; i < 4; i++) {
          assertTrue(out.contains(String.format("%-12s %-24s CONNECTED", "worker " + i,
              cluster.taskAddress(new TaskId("worker", i)))), out);
        }
        assertTrue(out.contains("all 4 tasks joined in"), out);
      }
    } finally {
      tasks.forEach(ChildJvm::close);
    }
  }

  @Test
  void withOneTaskNeverStartedTheOthersExitOneNamingIt() throws Exception {
    ClusterSpec cluster = fourWorkers();
    Duration timeout = Duration.ofSeconds(5);
    List<ChildJvm> tasks = new ArrayList<>();
    try {
      long start = System.nanoTime();
      for (int i = 0; i < 3; i++) {
        tasks.add(check("missing", cluster, i, "5s"));
      }
      String missing = "worker 3 at " + cluster.taskAddress(new TaskId("worker", 3)) + ": connection refused";
      for (ChildJvm task : tasks) {
        assertEquals(1, task.waitFor(Duration.ofSeconds(60)), task.output());
        // Each names the missing task, whether it hit its own deadline or saw the leader give up first.
        assertTrue(task.output().contains(missing), task.output());
        // one line on stderr: "muster check: worker i timed out ..." or, when the leader's own
        // deadline came first, "muster check: ABORTED: worker i failed while waiting ..."
        assertTrue(task.output().lines().anyMatch(l -> l.startsWith("muster check: ") && l.contains(missing)),
            task.output());
      }
      // The deadline counts from each task's start; JVM start-up on a loaded 2-core machine is the slack.
      Duration took = Duration.ofNanos(System.nanoTime() - start);
      assertTrue(took.compareTo(timeout.plusSeconds(15)) < 0, "took " + took);
    } finally {
      tasks.forEach(ChildJvm::close);
    }
  }
}
