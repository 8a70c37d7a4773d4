package io.muster.cli;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.muster.proto.tf.ServerDef;
import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/** The commands that read TF_CONFIG and print, run in this JVM. */
class CommandsTest {

  private static final String TF_CONFIG = "{\"cluster\":{\"chief\":[\"c:1\"],\"worker\":[\"w0:1\",\"w1:1\"],\"ps\":[\"p:1\"]},"
      + "\"task\":{\"type\":\"worker\",\"index\":1},\"rpc_layer\":\"grpc\"}";

  private record Result(int code, byte[] out, String err) {
    String text() {
      return new String(out, StandardCharsets.UTF_8);
    }
  }

  private static Result run(Map<String, String> env, String... args) {
    ByteArrayOutputStream out = new ByteArrayOutputStream();
    ByteArrayOutputStream err = new ByteArrayOutputStream();
    int code = Muster.run(List.of(args), env, new PrintStream(out, true), new PrintStream(err, true));
    return new Result(code, out.toByteArray(), err.toString(StandardCharsets.UTF_8));
  }

  @Test
  void helpListsEveryCommandOneLineEachTheMainJobFirst() {
    Result r = run(Map.of(), "--help");
    assertEquals(0, r.code());
    List<String> commands = r.text().lines().filter(line -> line.startsWith("  "))
        .map(line -> line.trim().split(" ")[0]).toList();
    assertEquals(List.of("demo", "spark-run", "example", "bench", "submit", "status", "kill", "yarn-local", "cluster",
        "check", "server-def", "checkpoint", "events"), commands);
  }

  @Test
  void clusterPrintsTheTasksIdentityAsJson() {
    Result r = run(Map.of("TF_CONFIG", TF_CONFIG), "cluster");
    assertEquals(0, r.code(), r.err());
    assertEquals("{\"task_type\": \"worker\", \"task_id\": 1, \"rpc_layer\": \"grpc\", \"master\": \"grpc://w1:1\", "
        + "\"is_chief\": false, \"id_in_cluster\": 2, \"num_workers\": 3, "
        + "\"collective_leader\": \"/job:chief/replica:0/task:0\", \"coordination_leader\": \"/job:ps/replica:0/task:0\", "
        + "\"cluster\": {\"chief\": [\"c:1\"], \"ps\": [\"p:1\"], \"worker\": [\"w0:1\", \"w1:1\"]}}\n", r.text());
  }

  @Test
  void clusterGivesPsNoIdInCluster() {
    Result r = run(Map.of("TF_CONFIG", TF_CONFIG.replace("\"type\":\"worker\",\"index\":1", "\"type\":\"ps\",\"index\":0")),
        "cluster");
    assertTrue(r.text().contains("\"is_chief\": false, \"id_in_cluster\": null, \"num_workers\": 3"), r.text());
  }

  @Test
  void aBadTfConfigExitsTwoWithOneLine() {
    Result r = run(Map.of("TF_CONFIG", "{\"cluster\":{\"worker\":[\"w0:1\"]},\"task\":{\"type\":\"worker\",\"index\":5}}"),
        "cluster");
    assertEquals(2, r.code());
    assertEquals("muster cluster: TF_CONFIG task.index 5 is out of range: job 'worker' has 1 task\n", r.err());
    assertEquals(0, r.out().length);
  }

  @Test
  void anUnsetTfConfigSaysWhatToSet() {
    Result r = run(Map.of(), "cluster");
    assertEquals(2, r.code());
    assertTrue(r.err().startsWith("muster cluster: TF_CONFIG is not set: export TF_CONFIG="), r.err());
  }

  @Test
  void serverDefIsTensorFlowsBinaryProto() throws Exception {
    Result r = run(Map.of("TF_CONFIG", TF_CONFIG), "server-def");
    assertEquals(0, r.code(), r.err());
    ServerDef def = ServerDef.parseFrom(r.out());
    assertEquals("worker", def.getJobName());
    assertEquals(1, def.getTaskIndex());
    assertEquals("grpc", def.getProtocol());
    assertEquals(3, def.getCluster().getJobCount());
  }

  @Test
  void serverDefAsText() {
    Result r = run(Map.of("TF_CONFIG", TF_CONFIG), "server-def", "--text");
    assertTrue(r.text().contains("job_name: \"worker\"\ntask_index: 1\n"), r.text());
  }

  @Test
  void unknownOptionsAndCommandsAreUsageErrors() {
    assertEquals("muster check: --timeout must be a positive duration such as 500ms, 60s, 5m or 1h; was 'soon'\n",
        run(Map.of("TF_CONFIG", TF_CONFIG), "check", "--timeout", "soon").err());
    assertEquals(2, run(Map.of(), "fly").code());
    assertEquals(2, run(Map.of("TF_CONFIG", TF_CONFIG), "server-def", "--binary").code());
  }

  @Test
  void checkWithoutATokenSaysHowToSetOne() {
    Result r = run(Map.of("TF_CONFIG", TF_CONFIG), "check");
    assertEquals(2, r.code());
    assertTrue(r.err().contains("MUSTER_JOB_TOKEN is not set"), r.err());
  }

  @Test
  void checkpointLsListsTheCheckpointsAndTheLatestTensors(@org.junit.jupiter.api.io.TempDir java.nio.file.Path tmp)
      throws Exception {
    org.apache.hadoop.fs.Path dir = new org.apache.hadoop.fs.Path(tmp.toUri());
    var fs = org.apache.hadoop.fs.FileSystem.getLocal(new org.apache.hadoop.conf.Configuration());
    var manager = new io.muster.checkpoint.CheckpointManager(fs, dir, io.muster.checkpoint.WritePolicy.SINGLE_WORKER,
        io.muster.checkpoint.CheckpointManager.Options.DEFAULTS);
    var tensors = new java.util.LinkedHashMap<String, io.muster.checkpoint.Tensor>();
    tensors.put("dense/kernel", io.muster.checkpoint.Tensor.ofFloats(new long[] {2, 3}, 1, 2, 3, 4, 5, 6));
    tensors.put("global_step", io.muster.checkpoint.Tensor.scalar(7));
    tensors.put("vocab", io.muster.checkpoint.Tensor.ofStrings(new long[] {2}, "a", "b"));
    manager.save(tensors);
    manager.save(tensors);
    Result r = run(Map.of(), "checkpoint", "ls", tmp.toString());
    assertEquals(0, r.code(), r.err());
    assertEquals("ckpt-1\nckpt-2  (latest)\n\ntensors of ckpt-2:\ndense/kernel  float32  [2, 3]\n"
        + "global_step  int64  []\nvocab  string  [2]\n", r.text());
  }

  @Test
  void eventsPrintsStepTagAndValue(@org.junit.jupiter.api.io.TempDir java.nio.file.Path tmp) throws Exception {
    var fs = org.apache.hadoop.fs.FileSystem.getLocal(new org.apache.hadoop.conf.Configuration());
    try (var writer = io.muster.summary.SummaryWriter.create(fs, new org.apache.hadoop.fs.Path(tmp.toUri()),
        io.muster.checkpoint.WritePolicy.SINGLE_WORKER, io.muster.summary.SummaryWriter.Options.DEFAULTS)) {
      writer.scalar("epoch_loss", 0.5, 1);
      writer.scalar("epoch_loss", 0.25, 2);
    }
    Result r = run(Map.of(), "events", tmp.toString());
    assertEquals(0, r.code(), r.err());
    assertTrue(r.text().endsWith("1\tepoch_loss\t0.5\n2\tepoch_loss\t0.25\n"), r.text());
    assertEquals(2, run(Map.of(), "events", tmp.resolve("nothing").toString()).code());
  }
}
