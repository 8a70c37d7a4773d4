package io.muster.launch;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.muster.cluster.ClusterSpec;
import io.muster.cluster.HostPort;
import io.muster.cluster.TaskId;
import io.muster.cluster.TaskType;
import io.muster.cluster.TfConfig;
import io.muster.rpc.JobToken;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.EnumSet;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import org.junit.jupiter.api.Test;

class GangTest {

  private static final JobToken TOKEN = JobToken.of("0123456789abcdef");

  private static List<HostPort> addresses(int n) {
    List<HostPort> list = new ArrayList<>();
    for (int i = 0; i < n; i++) {
      list.add(new HostPort("10.0.0." + (i + 1), 2222));
    }
    return list;
  }

  private static Map<String, String> env(Gang gang, int member) {
    return TaskEnvironment.of(gang, member, 0, List.of(), Path.of("/tmp/w"), Optional.empty(), TOKEN);
  }

  @Test
  void membersAreChiefThenWorkersThenPsThenEvaluator() {
    GangSpec spec = GangSpec.of(1, 2, 2, 1);
    assertEquals(List.of(new TaskId("chief", 0), new TaskId("worker", 0), new TaskId("worker", 1),
        new TaskId("ps", 0), new TaskId("ps", 1), new TaskId("evaluator", 0)), spec.tasks());
    assertEquals(3, spec.trainers());
    for (int m = 0; m < spec.size(); m++) {
      assertEquals(m, spec.member(spec.task(m)));
    }
    assertThrows(IllegalArgumentException.class, () -> spec.task(6));
    assertThrows(IllegalArgumentException.class, () -> spec.member(new TaskId("ps", 2)));
  }

  @Test
  void clusterFromAddressesInMemberOrderWithoutTheEvaluator() {
    Gang gang = GangSpec.of(1, 2, 1, 1).formed(List.of(new HostPort("c", 1), new HostPort("w0", 2),
        new HostPort("::1", 3), new HostPort("p", 4), new HostPort("e", 5)));
    assertEquals(ClusterSpec.of(Map.of("chief", List.of("c:1"), "worker", List.of("w0:2", "[::1]:3"),
        "ps", List.of("p:4"))), gang.cluster());
    assertEquals("{\"cluster\": {\"chief\": [\"c:1\"], \"ps\": [\"p:4\"], \"worker\": [\"w0:2\", \"[::1]:3\"]}, "
        + "\"task\": {\"type\": \"worker\", \"index\": 1}}", gang.tfConfig(2).toJson());
    assertEquals("{\"cluster\": {\"chief\": [\"c:1\"], \"evaluator\": [\"e:5\"], \"ps\": [\"p:4\"], "
        + "\"worker\": [\"w0:2\", \"[::1]:3\"]}, \"task\": {\"type\": \"evaluator\", \"index\": 0}}",
        gang.tfConfig(4).toJson());
  }

  /** Every mix of 0-1 chief, 0-3 workers, 0-2 ps and 0-1 evaluator that has a chief or a worker. */
  @Test
  void everyMixGivesEachMemberItsOwnTfConfigAndEnvironment() {
    int mixes = 0;
    for (int chiefs = 0; chiefs <= 1; chiefs++) {
      for (int workers = 0; workers <= 3; workers++) {
        for (int ps = 0; ps <= 2; ps++) {
          for (int evaluators = 0; evaluators <= 1; evaluators++) {
            if (chiefs + workers == 0) {
              continue;
            }
            mixes++;
            GangSpec spec = GangSpec.of(chiefs, workers, ps, evaluators);
            Gang gang = spec.formed(addresses(spec.size()));
            for (int m = 0; m < spec.size(); m++) {
              TaskId task = spec.task(m);
              TfConfig config = TfConfig.parse(gang.tfConfig(m).toJson());
              assertEquals(task, config.requireTask(), spec + " member " + m);
              assertEquals(gang.address(task).toString(), config.cluster().taskAddress(task));
              boolean evaluator = task.is(TaskType.EVALUATOR);
              assertEquals(evaluator, config.cluster().hasJob(TaskType.EVALUATOR), spec + " " + task);
              assertEquals(chiefs + workers + ps + (evaluator ? 1 : 0), config.cluster().allTasks().size());
              Map<String, String> env = env(gang, m);
              assertEquals(task.job(), env.get("MUSTER_TASK_TYPE"));
              assertEquals(String.valueOf(task.index()), env.get("MUSTER_TASK_INDEX"));
              assertEquals(String.valueOf(chiefs + workers), env.get("MUSTER_NUM_WORKERS"), spec + " " + task);
              boolean chief = task.is(TaskType.CHIEF) || evaluator
                  || (chiefs == 0 && task.equals(new TaskId("worker", 0)));
              assertEquals(String.valueOf(chief), env.get("MUSTER_IS_CHIEF"), spec + " " + task);
              assertEquals(gang.tfConfig(m).toJson(), env.get("TF_CONFIG"));
            }
          }
        }
      }
    }
    assertEquals(42, mixes);
  }

  @Test
  void environmentNamesTheWorkDirResultFileOutputDirAttemptGpusAndToken() {
    Gang gang = GangSpec.workers(2).formed(addresses(2));
    Map<String, String> env = TaskEnvironment.of(gang, 1, 3, List.of("5", "7"), Path.of("/tmp/w1"),
        Optional.of("hdfs://nn/out"), TOKEN);
    assertEquals("3", env.get("MUSTER_ATTEMPT"));
    assertEquals("5,7", env.get("CUDA_VISIBLE_DEVICES"));
    assertEquals("/tmp/w1", env.get("MUSTER_WORK_DIR"));
    assertEquals("/tmp/w1/result", env.get("MUSTER_RESULT_FILE"));
    assertEquals("hdfs://nn/out", env.get("MUSTER_OUTPUT_DIR"));
    assertEquals("0123456789abcdef", env.get("MUSTER_JOB_TOKEN"));
    assertEquals("false", env.get("MUSTER_IS_CHIEF"));
    assertEquals("", env(gang, 0).get("CUDA_VISIBLE_DEVICES"));
    assertFalse(env(gang, 0).containsKey("MUSTER_OUTPUT_DIR"));
    assertTrue(TaskEnvironment.isReserved("MUSTER_ANYTHING"));
    assertFalse(TaskEnvironment.isReserved("KERAS_BACKEND"));
  }

  @Test
  void aLocalOutputDirReachesTheCommandAsAPlainPathAndAnyOtherAsGiven() {
    Gang gang = GangSpec.workers(1).formed(addresses(1));
    assertEquals("/tmp/x", TaskEnvironment.of(gang, 0, 0, List.of(), Path.of("/tmp/w0"), Optional.of("file:///tmp/x"),
        TOKEN).get("MUSTER_OUTPUT_DIR"));
    assertEquals("/tmp/x", TaskEnvironment.forCommand("file:/tmp/x"));
    assertEquals("/tmp/x", TaskEnvironment.forCommand("FILE://localhost/tmp/x"));
    assertEquals("/tmp/my dir", TaskEnvironment.forCommand("file:///tmp/my%20dir"));
    assertEquals("/tmp/my dir", TaskEnvironment.forCommand("file:///tmp/my dir"));
    assertEquals("/tmp/x", TaskEnvironment.forCommand("/tmp/x"));
    assertEquals("relative/x", TaskEnvironment.forCommand("relative/x"));
    assertEquals("hdfs://nn:8020/jobs/x", TaskEnvironment.forCommand("hdfs://nn:8020/jobs/x"));
    assertEquals("s3a://bucket/jobs/x", TaskEnvironment.forCommand("s3a://bucket/jobs/x"));
  }

  @Test
  void untrackedByDefaultArePsAndEvaluatorAndWorkersWhenThereAreAChiefAndPs() {
    GangSpec sync = GangSpec.of(1, 2, 0, 1);
    assertEquals(EnumSet.of(TaskType.PS, TaskType.EVALUATOR), sync.untracked());
    assertTrue(sync.isTracked(new TaskId("worker", 1)));
    assertFalse(sync.isTracked(new TaskId("evaluator", 0)));
    GangSpec withPs = GangSpec.of(1, 2, 1, 0);
    assertTrue(withPs.isTracked(new TaskId("chief", 0)));
    assertFalse(withPs.isTracked(new TaskId("worker", 0)));
    assertFalse(withPs.isTracked(new TaskId("ps", 0)));
    assertTrue(withPs.withUntracked(Set.of(TaskType.PS)).isTracked(new TaskId("worker", 0)));
    assertTrue(GangSpec.of(0, 2, 1, 0).isTracked(new TaskId("worker", 1)), "between-graph: workers finish");
    assertEquals("1 chief, 2 workers, 1 ps (untracked: worker, ps)", withPs.toString());
  }

  @Test
  void invalidGangsAreRefusedWithTheReason() {
    assertEquals("chief count must be in 0..1, was 2",
        assertThrows(IllegalArgumentException.class, () -> GangSpec.of(2, 1, 0, 0)).getMessage());
    assertEquals("evaluator count must be in 0..1, was 2",
        assertThrows(IllegalArgumentException.class, () -> GangSpec.of(0, 1, 0, 2)).getMessage());
    assertEquals("a gang needs a chief or at least one worker, was 0 workers, 2 ps",
        assertThrows(IllegalArgumentException.class, () -> GangSpec.of(0, 0, 2, 0)).getMessage());
    assertEquals("every task of the gang (2 workers, 1 ps) is untracked (worker, ps), so nothing would end the job; "
        + "track the chief or the workers",
        assertThrows(IllegalArgumentException.class, () -> new GangSpec(0, 2, 1, 0, Set.of(TaskType.WORKER,
            TaskType.PS))).getMessage());
  }
}
