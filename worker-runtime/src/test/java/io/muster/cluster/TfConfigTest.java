package io.muster.cluster;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.muster.proto.tf.ClusterDef;
import io.muster.proto.tf.JobDef;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.OptionalInt;
import org.junit.jupiter.api.Test;

/** The literal cases of TensorFlow's tfconfig_cluster_resolver_test.py, and Muster's stricter checks. */
class TfConfigTest {

  private static final String C1 = "{\"cluster\":{\"ps\":[\"ps0:2222\",\"ps1:2222\"],"
      + "\"worker\":[\"worker0:2222\",\"worker1:2222\",\"worker2:2222\"]},\"task\":{\"type\":\"ps\",\"index\":0}}";

  private static String c1With(String extra) {
    return C1.substring(0, C1.length() - 1) + "," + extra + "}";
  }

  @Test
  void normalClusterSpecReadSortsJobsAndTasks() {
    ClusterDef expected = ClusterDef.newBuilder()
        .addJob(JobDef.newBuilder().setName("ps").putTasks(0, "ps0:2222").putTasks(1, "ps1:2222"))
        .addJob(JobDef.newBuilder().setName("worker")
            .putTasks(0, "worker0:2222").putTasks(1, "worker1:2222").putTasks(2, "worker2:2222"))
        .build();
    ClusterSpec spec = TfConfig.parse(C1).cluster();
    assertEquals(expected, spec.toClusterDef());
    assertEquals(spec, ClusterSpec.fromClusterDef(expected));
    assertEquals(Map.of("ps", List.of("ps0:2222", "ps1:2222"),
        "worker", List.of("worker0:2222", "worker1:2222", "worker2:2222")), spec.asDict());
  }

  @Test
  void automaticMasterReadIsThisTasksAddress() {
    assertEquals("ps0:2222", TfConfig.parse(C1).master());
  }

  @Test
  void specifiedTaskTypeAndIndexMasterRead() {
    assertEquals("worker1:2222", TfConfig.parse(C1).master("worker", 1, null));
  }

  @Test
  void sessionMasterWinsVerbatim() {
    assertEquals("sessionmaster:2222", TfConfig.parse(c1With("\"session_master\":\"sessionmaster:2222\"")).master());
  }

  @Test
  void rpcLayerPrefixesMaster() {
    assertEquals("grpc://ps0:2222", TfConfig.parse(c1With("\"rpc_layer\":\"grpc\"")).master());
  }

  @Test
  void taskTypeIndexAndRpcLayerRead() {
    TfConfig config = TfConfig.parse(c1With("\"rpc_layer\":\"grpc\""));
    assertEquals(Optional.of("ps"), config.taskType());
    assertEquals(OptionalInt.of(0), config.taskIndex());
    assertEquals(Optional.of("grpc"), config.rpcLayer());
  }

  @Test
  void parameterOverridesReplaceTaskAndRpcLayer() {
    TfConfig config = TfConfig.parse(c1With("\"rpc_layer\":\"grpc\"").replace("\"index\":0", "\"index\":1"))
        .withTask(new TaskId("ps", 0));
    assertEquals("grpc://ps0:2222", config.master());
    assertEquals(new TaskId("ps", 0), config.requireTask());

    TfConfig overridden = config.withTask(new TaskId("worker", 1)).withRpcLayer("test");
    assertEquals("test://worker1:2222", overridden.master());
    assertEquals(new TaskId("worker", 1), overridden.requireTask());
    assertEquals(Optional.of("test"), overridden.rpcLayer());
  }

  @Test
  void numericTaskTypeIsCastToString() {
    TfConfig config = TfConfig.parse("{\"cluster\":{\"123456\":[\"ps0:2222\",\"ps1:2222\"],"
        + "\"worker\":[\"worker0:2222\",\"worker1:2222\",\"worker2:2222\"]},\"task\":{\"type\":123456,\"index\":0}}");
    assertEquals(Optional.of("123456"), config.taskType());
  }

  @Test
  void stringTaskIndexIsCastToInteger() {
    assertEquals(OptionalInt.of(1), TfConfig.parse(C1.replace("\"index\":0", "\"index\":\"1\"")).taskIndex());
  }

  @Test
  void taskIndexOverride() {
    TfConfig config = TfConfig.parse(
        "{\"cluster\":{\"worker\":[\"worker0:2222\",\"worker1:2222\"]},\"task\":{\"type\":\"worker\",\"index\":\"0\"}}");
    assertEquals(new TaskId("worker", 1), config.withTask(new TaskId("worker", 1)).requireTask());
  }

  @Test
  void zeroItemsInClusterSpecMasterIsEmpty() {
    assertEquals("", TfConfig.parse("{}").master());
  }

  @Test
  void oneItemInClusterSpecMasterIsEmpty() {
    assertEquals("", TfConfig.parse("{\"cluster\":{\"worker\":[\"worker0:2222\"]}}").master());
  }

  @Test
  void unsetTfConfigIsEmpty() {
    TfConfig config = TfConfig.fromEnvironment(Map.of());
    assertEquals(Optional.empty(), config.taskType());
    assertEquals(OptionalInt.empty(), config.taskIndex());
    assertEquals(Optional.empty(), config.rpcLayer());
    assertTrue(config.cluster().isEmpty());
    assertEquals("", config.master());
  }

  @Test
  void sessionMasterWithoutCluster() {
    assertEquals("x:1", TfConfig.parse("{\"session_master\":\"x:1\"}").master());
  }

  @Test
  void multiJobClusterWithoutTaskHasNoMaster() {
    String noTask = "{\"cluster\":{\"ps\":[\"ps0:2222\"],\"worker\":[\"worker0:2222\"]}}";
    var e = assertThrows(ClusterConfigException.class, () -> TfConfig.parse(noTask).master());
    assertEquals("No such job in cluster: None", e.getMessage());
  }

  @Test
  void missingIndexIsEmptyButDefaultsToZeroForTheServer() {
    TfConfig config = TfConfig.parse("{\"task\":{\"type\":\"worker\"}}");
    assertEquals(OptionalInt.empty(), config.taskIndex());
    assertEquals(new TaskId("worker", 0), config.requireTask());
  }

  @Test
  void environmentKeyIsIgnored() {
    TfConfig config = TfConfig.parse("{\"environment\":\"cloud\",\"cluster\":{\"worker\":[\"a:1\"]}}");
    assertEquals(ClusterSpec.of(Map.of("worker", List.of("a:1"))), config.cluster());
  }

  @Test
  void masterRpcLayerArgumentOverrides() {
    assertEquals("grpc+verbs://ps0:2222",
        TfConfig.parse(c1With("\"rpc_layer\":\"grpc\"")).master("ps", 0, "grpc+verbs"));
  }

  @Test
  void emptyRpcLayerGivesNoPrefix() {
    assertEquals("ps0:2222", TfConfig.parse(c1With("\"rpc_layer\":\"\"")).master());
  }

  @Test
  void sparseJobs() {
    ClusterSpec spec = TfConfig.parse("{\"cluster\":{\"worker\":{\"1\":\"a:1\",\"3\":\"b:1\"}}}").cluster();
    assertEquals(Map.of("worker", Map.of(1, "a:1", 3, "b:1")), spec.asDict());
    assertEquals(Arrays.asList(null, "a:1", null, "b:1"), spec.jobTasks("worker"));
    assertEquals(2, spec.numTasks("worker"));
  }

  @Test
  void renderedJsonParsesBackToTheSameConfig() {
    TfConfig config = TfConfig.parse(c1With("\"rpc_layer\":\"grpc\""));
    assertEquals("{\"cluster\": {\"ps\": [\"ps0:2222\", \"ps1:2222\"], "
        + "\"worker\": [\"worker0:2222\", \"worker1:2222\", \"worker2:2222\"]}, "
        + "\"task\": {\"type\": \"ps\", \"index\": 0}, \"rpc_layer\": \"grpc\"}", config.toJson());
    assertEquals(config, TfConfig.parse(config.toJson()));
    TfConfig sparse = TfConfig.parse("{\"cluster\":{\"worker\":{\"1\":\"a:1\",\"3\":\"b:1\"}},\"task\":{\"type\":\"worker\",\"index\":3}}");
    assertEquals(sparse, TfConfig.parse(sparse.toJson()));
  }

  // Muster's own checks: a clear error instead of a hang.

  private static String errorOf(String json) {
    return assertThrows(ClusterConfigException.class, () -> TfConfig.parse(json)).getMessage();
  }

  @Test
  void malformedJsonNamesLineAndColumn() {
    assertEquals("TF_CONFIG is not valid JSON: malformed JSON at line 1, column 31: expected ',' or '}'",
        errorOf("{\"cluster\":{\"worker\":[\"a:1\"]} \"task\":{}}"));
    assertEquals("TF_CONFIG is not valid JSON: malformed JSON at line 1, column 12: unexpected end of input, expected a value",
        errorOf("{\"cluster\":"));
  }

  @Test
  void topLevelMustBeAnObject() {
    assertEquals("TF_CONFIG must be a JSON object, was a list [\"worker\"]", errorOf("[\"worker\"]"));
  }

  @Test
  void missingTaskAndTaskType() {
    var noTask = assertThrows(ClusterConfigException.class,
        () -> TfConfig.parse("{\"cluster\":{\"worker\":[\"a:1\"]}}").requireTask());
    assertEquals("\"task\" is not found in TF_CONFIG.", noTask.getMessage());
    var noType = assertThrows(ClusterConfigException.class,
        () -> TfConfig.parse("{\"cluster\":{\"worker\":[\"a:1\"]},\"task\":{\"index\":0}}").requireTask());
    assertEquals("\"task_type\" is not found in the `task` part of TF_CONFIG.", noType.getMessage());
  }

  @Test
  void taskIndexOutOfRange() {
    assertEquals("TF_CONFIG task.index 5 is out of range: job 'worker' has 3 tasks",
        errorOf(C1.replace("\"type\":\"ps\",\"index\":0", "\"type\":\"worker\",\"index\":5")));
    assertEquals("TF_CONFIG task.index 2 is out of range: job 'worker' has tasks 1, 3",
        errorOf("{\"cluster\":{\"worker\":{\"1\":\"a:1\",\"3\":\"b:1\"}},\"task\":{\"type\":\"worker\",\"index\":2}}"));
  }

  @Test
  void taskTypeNotInCluster() {
    assertEquals("TF_CONFIG task.type 'chief' is not a job of the cluster (jobs: ps, worker)",
        errorOf(C1.replace("\"type\":\"ps\"", "\"type\":\"chief\"")));
  }

  @Test
  void evaluatorMayBeOutsideTheCluster() {
    TfConfig config = TfConfig.parse(C1.replace("\"type\":\"ps\"", "\"type\":\"evaluator\""));
    assertEquals(new TaskId("evaluator", 0), config.requireTask());
  }

  @Test
  void badTaskIndex() {
    assertEquals("TF_CONFIG task.index \"abc\" is not a task index (a non-negative integer)",
        errorOf(C1.replace("\"index\":0", "\"index\":\"abc\"")));
    assertEquals("TF_CONFIG task.index -1 is not a task index (a non-negative integer)",
        errorOf(C1.replace("\"index\":0", "\"index\":-1")));
    assertEquals("TF_CONFIG task.index 1.5 is not a task index (a non-negative integer)",
        errorOf(C1.replace("\"index\":0", "\"index\":1.5")));
  }

  @Test
  void duplicateAddresses() {
    assertEquals("TF_CONFIG cluster tasks ps 0 and worker 1 have the same address h:1: every task needs its own host:port",
        errorOf("{\"cluster\":{\"ps\":[\"h:1\"],\"worker\":[\"h:0\",\"h:1\"]}}"));
  }

  @Test
  void emptyJob() {
    assertEquals("TF_CONFIG cluster.ps is empty: a job needs at least one \"host:port\"",
        errorOf("{\"cluster\":{\"ps\":[],\"worker\":[\"h:0\"]}}"));
  }

  @Test
  void nonIntegerPort() {
    assertEquals("TF_CONFIG cluster.worker[1]: address 'h:abc' has a port that is not an integer: 'abc'",
        errorOf("{\"cluster\":{\"worker\":[\"h:0\",\"h:abc\"]}}"));
    assertEquals("TF_CONFIG cluster.worker[0]: address 'h' has no port: expected host:port",
        errorOf("{\"cluster\":{\"worker\":[\"h\"]}}"));
    assertEquals("TF_CONFIG cluster.worker[0]: address 'h:70000' has port 70000, outside 0..65535",
        errorOf("{\"cluster\":{\"worker\":[\"h:70000\"]}}"));
  }

  @Test
  void addressMustBeAString() {
    assertEquals("TF_CONFIG cluster.worker[0] must be a \"host:port\" string, was 2222",
        errorOf("{\"cluster\":{\"worker\":[2222]}}"));
  }

  @Test
  void jobMustBeListOrMap() {
    assertEquals("The tasks for job 'worker' must be a list or a dictionary from integers to strings, was \"h:1\"",
        errorOf("{\"cluster\":{\"worker\":\"h:1\"}}"));
  }

  @Test
  void duplicateJsonKey() {
    assertEquals("TF_CONFIG is not valid JSON: malformed JSON at line 1, column 30: duplicate key \"worker\"",
        errorOf("{\"cluster\":{\"worker\":[\"a:1\"],\"worker\":[\"b:1\"]}}"));
  }

  @Test
  void ipv6AddressesInBrackets() {
    ClusterSpec spec = TfConfig.parse("{\"cluster\":{\"worker\":[\"[::1]:2222\"]}}").cluster();
    assertEquals(new HostPort("::1", 2222), HostPort.parse(spec.taskAddress(new TaskId("worker", 0))));
    assertEquals("[::1]:2222", new HostPort("::1", 2222).toString());
  }

  @Test
  void aLaunchersConfigMustNameATaskOfTheCluster() {
    ClusterSpec cluster = ClusterSpec.of(Map.of("worker", List.of("a:1", "b:1")));
    TfConfig config = TfConfig.of(cluster, new TaskId("worker", 1));
    assertEquals(new TaskId("worker", 1), config.requireTask());
    assertEquals("{\"cluster\": {\"worker\": [\"a:1\", \"b:1\"]}, \"task\": {\"type\": \"worker\", \"index\": 1}}",
        config.toJson());
    assertThrows(ClusterConfigException.class, () -> TfConfig.of(cluster, new TaskId("worker", 2)));
    assertThrows(ClusterConfigException.class, () -> config.withTask(new TaskId("chief", 0)));
    assertEquals(new TaskId("worker", 0), config.withTask(new TaskId("worker", 0)).requireTask());
  }

  @Test
  void anIndexWithoutATypeIsRenderedAsGiven() {
    TfConfig indexOnly = TfConfig.parse("{\"cluster\":{\"worker\":[\"a:1\"]},\"task\":{\"index\":0}}");
    assertEquals("{\"cluster\": {\"worker\": [\"a:1\"]}, \"task\": {\"index\": 0}}", indexOnly.toJson());
    TfConfig master = TfConfig.parse("{\"cluster\":{\"worker\":[\"a:1\"]},\"session_master\":\"grpc://m:1\"}");
    assertEquals("{\"cluster\": {\"worker\": [\"a:1\"]}, \"session_master\": \"grpc://m:1\"}", master.toJson());
  }

  @Test
  void aFieldOfTheWrongShapeIsDescribedInTheError() {
    assertEquals("TF_CONFIG cluster.worker[0] must be a \"host:port\" string, was null",
        errorOf("{\"cluster\":{\"worker\":[null]}}"));
    assertEquals("TF_CONFIG rpc_layer must be a string, was a list [1]", errorOf("{\"rpc_layer\":[1]}"));
    assertEquals("TF_CONFIG rpc_layer must be a string, was an object {\"a\": 1}", errorOf("{\"rpc_layer\":{\"a\":1}}"));
  }
}
