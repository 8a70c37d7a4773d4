package io.muster.cluster;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;
import java.util.Map;
import java.util.Optional;
import org.junit.jupiter.api.Test;

/** The literal cases of TensorFlow's multi_worker_util_test.py. */
class RolesTest {

  private static final ClusterSpec CS = ClusterSpec.of(Map.of(
      "chief", List.of("127.0.0.1:1234"),
      "worker", List.of("127.0.0.1:8964", "127.0.0.1:2333"),
      "ps", List.of("127.0.0.1:1926", "127.0.0.1:3141")));
  private static final ClusterSpec TWO_WORKERS = ClusterSpec.of(Map.of("worker", List.of("127.0.0.1:1", "127.0.0.1:2")));
  private static final ClusterSpec WITH_EVALUATOR = ClusterSpec.of(Map.of(
      "chief", List.of("127.0.0.1:1"), "worker", List.of("127.0.0.1:2", "127.0.0.1:3"), "evaluator", List.of("127.0.0.1:4")));

  private static String error(Runnable call) {
    return assertThrows(ClusterConfigException.class, call::run).getMessage();
  }

  @Test
  void chiefIsTheChiefAndWorkerZeroIsNotWhenAChiefExists() {
    assertTrue(Roles.isChief(CS, "chief", 0));
    assertFalse(Roles.isChief(CS, "worker", 0));
  }

  @Test
  void workerZeroIsChiefWithoutAChief() {
    assertTrue(Roles.isChief(TWO_WORKERS, "worker", 0));
    assertFalse(Roles.isChief(TWO_WORKERS, "worker", 1));
    assertEquals("`task_type` 'chief' not found in cluster_spec.", error(() -> Roles.isChief(TWO_WORKERS, "chief", 0)));
    assertEquals("The `task_id` 2 exceeds the maximum id of worker.", error(() -> Roles.isChief(TWO_WORKERS, "worker", 2)));
  }

  @Test
  void evaluatorIsAChiefOfItsOwn() {
    assertTrue(Roles.isChief(WITH_EVALUATOR, "evaluator", 0));
  }

  @Test
  void psIsNeverChief() {
    assertFalse(Roles.isChief(CS, "ps", 0));
  }

  @Test
  void workerCountIsChiefPlusWorkers() {
    assertEquals(3, Roles.workerCount(CS, "chief"));
    assertEquals(3, Roles.workerCount(CS, "worker"));
    assertEquals(1, Roles.workerCount(WITH_EVALUATOR, "evaluator"));
    assertEquals("`task_type` 'worker' not found in cluster_spec.",
        error(() -> Roles.workerCount(ClusterSpec.empty(), "worker")));
    ClusterSpec chiefAndPs = ClusterSpec.of(Map.of("chief", List.of("127.0.0.1:1"), "ps", List.of("127.0.0.1:2")));
    assertEquals("Unexpected `task_type` 'ps'", error(() -> Roles.workerCount(chiefAndPs, "ps")));
  }

  @Test
  void idInCluster() {
    assertEquals(0, Roles.idInCluster(CS, "chief", 0));
    assertEquals(2, Roles.idInCluster(CS, "worker", 1));
    assertEquals(1, Roles.idInCluster(TWO_WORKERS, "worker", 1));
    assertEquals(0, Roles.idInCluster(WITH_EVALUATOR, "evaluator", 0));
    assertEquals("There is no id for task_type 'ps'", error(() -> Roles.idInCluster(CS, "ps", 0)));
    assertEquals(Optional.empty(), Roles.idInClusterIfAny(CS, new TaskId("ps", 1)));
    assertEquals(Optional.of(2), Roles.idInClusterIfAny(CS, new TaskId("worker", 1)));
  }

  @Test
  void twoChiefsAreRejected() {
    ClusterSpec twoChiefs = ClusterSpec.of(Map.of("chief", List.of("127.0.0.1:1", "127.0.0.1:2")));
    assertEquals("There must be at most one 'chief' job.", error(() -> Roles.idInCluster(twoChiefs, "chief", 0)));
  }

  @Test
  void twoEvaluatorsAreRejected() {
    ClusterSpec twoEvaluators = ClusterSpec.of(Map.of(
        "worker", List.of("127.0.0.1:1"), "evaluator", List.of("127.0.0.1:2", "127.0.0.1:3")));
    assertEquals("There must be at most one 'evaluator' job.", error(() -> Roles.isChief(twoEvaluators, "worker", 0)));
  }

  @Test
  void collectiveLeader() {
    assertEquals("/job:chief/replica:0/task:0", Roles.collectiveLeader(CS, "worker", 0));
    assertEquals("/job:worker/replica:0/task:0", Roles.collectiveLeader(TWO_WORKERS, "worker", 1));
    assertEquals("", Roles.collectiveLeader(WITH_EVALUATOR, "evaluator", 0));
    assertEquals("", Roles.collectiveLeader(ClusterSpec.empty(), null, 0));
  }

  @Test
  void coordinationLeaderPrefersPsThenChiefThenWorker() {
    assertEquals("/job:ps/replica:0/task:0", Roles.coordinationLeader(CS));
    assertEquals("/job:chief/replica:0/task:0", Roles.coordinationLeader(WITH_EVALUATOR));
    assertEquals("/job:worker/replica:0/task:0", Roles.coordinationLeader(TWO_WORKERS));
    assertEquals("", Roles.coordinationLeader(ClusterSpec.empty()));
  }

  @Test
  void validateAcceptsEveryAllowedTypeIncludingAnAbsentEvaluator() {
    for (String type : List.of("chief", "worker", "ps", "evaluator")) {
      Roles.validate(CS, type, 0);
    }
    ClusterSpec chiefAndPs = ClusterSpec.of(Map.of("chief", List.of("127.0.0.1:1"), "ps", List.of("127.0.0.1:2")));
    assertEquals("`task_type` 'worker' not found in cluster_spec.", error(() -> Roles.validate(chiefAndPs, "worker", 0)));
  }

  @Test
  void validateRejectsOtherJobNames() {
    ClusterSpec odd = ClusterSpec.of(Map.of("worker1", List.of("127.0.0.1:1")));
    assertTrue(error(() -> Roles.validate(odd, "worker1", 0)).startsWith(
        "Disallowed task type found in cluster spec. Allowed types are ('chief', 'worker', 'evaluator', 'ps', None)"));
    assertEquals("Unrecognized task_type: 'master', valid task types are: ('chief', 'worker', 'evaluator', 'ps', None)",
        error(() -> Roles.validate(CS, "master", 0)));
  }

  @Test
  void anEvaluatorOutsideTheClusterKeepsItsOwnIndexAsItsId() {
    // TensorFlow's id_in_cluster returns task_id for the evaluator, which need not be in the cluster
    assertEquals(3, Roles.idInCluster(CS, "evaluator", 3));
    assertEquals(Optional.of(3), Roles.idInClusterIfAny(CS, new TaskId("evaluator", 3)));
  }

  @Test
  void rulesThatTakeATaskValidateItFirst() {
    assertEquals("The `task_id` 2 exceeds the maximum id of ps.",
        error(() -> Roles.idInClusterIfAny(CS, new TaskId("ps", 2))));
    assertEquals("The `task_id` 2 exceeds the maximum id of worker.", error(() -> Roles.collectiveLeader(CS, "worker", 2)));
    assertEquals("The `task_id` 1 exceeds the maximum id of chief.", error(() -> Roles.isChief(CS, new TaskId("chief", 1))));
    assertTrue(Roles.isChief(CS, new TaskId("chief", 0)));
    assertFalse(Roles.isChief(CS, new TaskId("worker", 0)));
  }
}
