package io.muster.cluster;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.util.List;
import java.util.Map;
import java.util.TreeSet;
import org.junit.jupiter.api.Test;

/** Task identity: validated on construction, ordered as ClusterSpec.as_cluster_def() orders tasks. */
class TaskIdTest {

  @Test
  void aJobNameAndANonNegativeIndexAreRequired() {
    assertEquals("task job name must be non-empty, was null",
        assertThrows(ClusterConfigException.class, () -> new TaskId(null, 0)).getMessage());
    assertEquals("task job name must be non-empty, was ''",
        assertThrows(ClusterConfigException.class, () -> new TaskId("", 0)).getMessage());
    assertEquals("task index must be >= 0, was -1 (job 'worker')",
        assertThrows(ClusterConfigException.class, () -> new TaskId("worker", -1)).getMessage());
    assertEquals(0, new TaskId("worker", 0).index());
  }

  @Test
  void jobsByNameThenTasksByIndex() {
    TreeSet<TaskId> sorted = new TreeSet<>(List.of(new TaskId("worker", 10), new TaskId("ps", 1),
        new TaskId("worker", 2), new TaskId("chief", 0), new TaskId("ps", 0)));
    assertEquals(List.of(new TaskId("chief", 0), new TaskId("ps", 0), new TaskId("ps", 1), new TaskId("worker", 2),
        new TaskId("worker", 10)), List.copyOf(sorted));
    assertEquals("/job:worker/replica:0/task:2", new TaskId("worker", 2).fullName());
    assertEquals("worker 2", new TaskId("worker", 2).toString());
  }

  @Test
  void clusterSpecsAreEqualByTheirJobsAndPrintAsJson() {
    ClusterSpec a = ClusterSpec.of(Map.of("worker", List.of("a:1", "b:1"), "ps", List.of("p:1")));
    ClusterSpec b = ClusterSpec.of(Map.of("ps", List.of("p:1"), "worker", List.of("a:1", "b:1")));
    ClusterSpec other = ClusterSpec.of(Map.of("worker", List.of("a:1")));
    assertEquals(a, b);
    assertEquals(a.hashCode(), b.hashCode());
    assertNotEquals(a, other);
    assertNotEquals(a, "not a cluster");
    assertEquals("{\"ps\": [\"p:1\"], \"worker\": [\"a:1\", \"b:1\"]}", a.toString());
    assertEquals("No such job in cluster: 'chief'",
        assertThrows(ClusterConfigException.class, () -> a.tasks("chief")).getMessage());
  }
}
