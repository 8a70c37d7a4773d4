package io.muster.cluster;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;

import io.muster.proto.tf.ServerDef;
import org.junit.jupiter.api.Test;

class ServerDefsTest {

  private static final String CLUSTER = "{\"cluster\":{\"chief\":[\"c:1\"],\"worker\":[\"w0:1\",\"w1:1\"],\"ps\":[\"p:1\"]},";

  @Test
  void workerGetsMultiWorkerMirroredStrategysServerDef() {
    ServerDef def = ServerDefs.forTask(TfConfig.parse(CLUSTER + "\"task\":{\"type\":\"worker\",\"index\":1}}"));
    assertEquals("worker", def.getJobName());
    assertEquals(1, def.getTaskIndex());
    assertEquals("grpc", def.getProtocol());
    assertEquals(0, def.getPort());
    assertEquals(TfConfig.parse(CLUSTER + "\"task\":{\"type\":\"worker\",\"index\":1}}").cluster().toClusterDef(), def.getCluster());
    assertEquals("/job:worker/task:1", def.getDefaultSessionConfig().getDeviceFilters(0));
    var experimental = def.getDefaultSessionConfig().getExperimental();
    assertEquals("/job:chief/replica:0/task:0", experimental.getCollectiveGroupLeader());
    assertEquals("/job:ps/replica:0/task:0", experimental.getCoordinationConfig().getServiceLeader());
    assertEquals("standalone", experimental.getCoordinationConfig().getServiceType());
    assertEquals("chief", experimental.getCoordinationConfig().getCoordinatedJobList(0).getName());
    assertEquals(2, experimental.getCoordinationConfig().getCoordinatedJobList(1).getNumTasks());
  }

  @Test
  void psGetsAPlainServerDefWithItsRpcLayer() {
    ServerDef def = ServerDefs.forTask(TfConfig.parse(CLUSTER + "\"task\":{\"type\":\"ps\",\"index\":0},\"rpc_layer\":\"grpc+verbs\"}"));
    assertEquals("ps", def.getJobName());
    assertEquals("grpc+verbs", def.getProtocol());
    assertFalse(def.hasDefaultSessionConfig());
  }

  @Test
  void anEmptyRpcLayerMeansGrpc() {
    ServerDef def = ServerDefs.forTask(TfConfig.parse(CLUSTER + "\"task\":{\"type\":\"worker\",\"index\":0},\"rpc_layer\":\"\"}"));
    assertEquals("grpc", def.getProtocol());
  }

  @Test
  void wireBytesMatchTensorFlowsFieldNumbers() {
    ServerDef def = ServerDef.newBuilder().setJobName("worker").setTaskIndex(1).setProtocol("grpc").build();
    // field 2 "worker", field 3 varint 1, field 5 "grpc"
    byte[] expected = {0x12, 6, 'w', 'o', 'r', 'k', 'e', 'r', 0x18, 1, 0x2a, 4, 'g', 'r', 'p', 'c'};
    assertEquals(java.util.HexFormat.of().formatHex(expected), java.util.HexFormat.of().formatHex(def.toByteArray()));
  }
}
