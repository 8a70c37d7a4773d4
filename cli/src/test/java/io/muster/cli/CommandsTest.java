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

  private static java.nio.file.Path threeLossEvents(java.nio.file.Path dir) throws Exception {
    var fs = org.apache.hadoop.fs.FileSystem.getLocal(new org.apache.hadoop.conf.Configuration());
    try (var writer = io.muster.summary.SummaryWriter.create(fs, new org.apache.hadoop.fs.Path(dir.toUri()),
        io.muster.checkpoint.WritePolicy.SINGLE_WORKER, io.muster.summary.SummaryWriter.Options.DEFAULTS)) {
      writer.scalar("epoch_loss", 0.5, 1);
      writer.scalar("epoch_loss", 0.25, 2);
      writer.scalar("epoch_loss", 0.125, 3);
      return java.nio.file.Path.of(writer.file().toUri());
    }
  }

  /** Where each TFRecord of a file starts: 8 bytes of length, 4 of its CRC, the data, 4 of the data's CRC. */
  private static List<Integer> recordOffsets(byte[] file) {
    List<Integer> offsets = new java.util.ArrayList<>();
    for (int at = 0; at < file.length; ) {
      offsets.add(at);
      at += 16 + (int) java.nio.ByteBuffer.wrap(file, at, 8).order(java.nio.ByteOrder.LITTLE_ENDIAN).getLong();
    }
    return offsets;
  }

  @Test
  void eventsOfAFileCutMidRecordPrintsEveryIntactRecordThenWarnsAndExitsZero(
      @org.junit.jupiter.api.io.TempDir java.nio.file.Path tmp) throws Exception {
    java.nio.file.Path file = threeLossEvents(tmp);
    byte[] bytes = java.nio.file.Files.readAllBytes(file);
    java.nio.file.Files.write(file, java.util.Arrays.copyOf(bytes, bytes.length - 5)); // the writer died in the last
    int last = recordOffsets(bytes).get(3);

    Result r = run(Map.of(), "events", file.toString());
    assertEquals(0, r.code(), r.err());
    assertEquals("1\tepoch_loss\t0.5\n2\tepoch_loss\t0.25\n", r.text());
    assertEquals("muster events: warning: " + file + ": truncated record at offset "
        + last + ": " + (bytes.length - last - 16) + " data bytes announced, the file ends first; the writer probably "
        + "died mid-write; the 3 intact records before it are shown\n", r.err());
  }

  @Test
  void eventsOfAFileThatIsNoEventFileIsOneLineAndExitsOne(@org.junit.jupiter.api.io.TempDir java.nio.file.Path tmp)
      throws Exception {
    java.nio.file.Path text = java.nio.file.Files.writeString(tmp.resolve("notes.txt"),
        "these are notes, not events; a line long enough to be read as a record's header\n");
    java.nio.file.Path empty = java.nio.file.Files.write(tmp.resolve("events.out.tfevents.1.h.1.0.v2"), new byte[0]);
    Result r = run(Map.of(), "events", text.toString());
    assertEquals(1, r.code(), r.err());
    assertEquals("", r.text());
    assertTrue(r.err().startsWith("muster events: " + text + " is not a TensorFlow event file: its first record is "
        + "unreadable ("), r.err());
    assertEquals(1, r.err().lines().count(), r.err());
    Result e = run(Map.of(), "events", empty.toString());
    assertEquals(1, e.code(), e.err());
    assertEquals("muster events: " + empty + " is not a TensorFlow event file: it is empty\n", e.err());
  }

  @Test
  void eventsWithACorruptRecordInTheMiddlePrintsTheRecordsBeforeItAndExitsOne(
      @org.junit.jupiter.api.io.TempDir java.nio.file.Path tmp) throws Exception {
    java.nio.file.Path file = threeLossEvents(tmp);
    byte[] bytes = java.nio.file.Files.readAllBytes(file);
    int second = recordOffsets(bytes).get(2); // the file-version event, then step 1, then step 2
    bytes[second + 12 + 3] ^= 0x40;
    java.nio.file.Files.write(file, bytes);

    Result r = run(Map.of(), "events", file.toString());
    assertEquals(1, r.code(), r.err());
    assertEquals("1\tepoch_loss\t0.5\n", r.text());
    assertEquals("muster events: " + file + ": corrupt record data at offset "
        + second + " (CRC mismatch); the 2 records before it are shown, the rest of the file is unreadable\n", r.err());
  }

  private static java.util.Map<String, io.muster.checkpoint.Tensor> threeTensors(int step) {
    var tensors = new java.util.LinkedHashMap<String, io.muster.checkpoint.Tensor>();
    tensors.put("dense/kernel", io.muster.checkpoint.Tensor.ofFloats(new long[] {2, 3}, 1, 2, 3, 4, 5, 6));
    tensors.put("global_step", io.muster.checkpoint.Tensor.scalar(step));
    tensors.put("vocab", io.muster.checkpoint.Tensor.ofStrings(new long[] {2}, "a", "b"));
    return tensors;
  }

  private static void twoCheckpoints(java.nio.file.Path dir) throws Exception {
    var fs = org.apache.hadoop.fs.FileSystem.getLocal(new org.apache.hadoop.conf.Configuration());
    try (var manager = new io.muster.checkpoint.CheckpointManager(fs, new org.apache.hadoop.fs.Path(dir.toUri()),
        io.muster.checkpoint.WritePolicy.SINGLE_WORKER, io.muster.checkpoint.CheckpointManager.Options.DEFAULTS)) {
      manager.save(threeTensors(1));
      manager.save(threeTensors(2));
    }
  }

  /** Flips one bit of a tensor's bytes in ckpt-N's data file, as a bad disk would (the file system's own checksum sidecar goes too). */
  private static void flipAByteOf(java.nio.file.Path dir, String checkpoint, String tensor) throws Exception {
    var fs = org.apache.hadoop.fs.FileSystem.getLocal(new org.apache.hadoop.conf.Configuration());
    var prefix = new org.apache.hadoop.fs.Path(dir.toUri().toString(), checkpoint);
    long offset = io.muster.checkpoint.BundleReader.open(fs, prefix).entries().get(tensor).getOffset();
    java.nio.file.Path data = dir.resolve(checkpoint + ".data-00000-of-00001");
    byte[] bytes = java.nio.file.Files.readAllBytes(data);
    bytes[(int) offset + 5] ^= 0x10;
    java.nio.file.Files.write(data, bytes);
    java.nio.file.Files.deleteIfExists(dir.resolve("." + data.getFileName() + ".crc"));
  }

  @Test
  void checkpointVerifyReadsEveryTensorOfTheLatestAndSaysItIsIntact(@org.junit.jupiter.api.io.TempDir java.nio.file.Path tmp)
      throws Exception {
    twoCheckpoints(tmp);
    var fs = org.apache.hadoop.fs.FileSystem.getLocal(new org.apache.hadoop.conf.Configuration());
    long bytes = io.muster.checkpoint.BundleReader.open(fs, new org.apache.hadoop.fs.Path(tmp.toUri().toString(), "ckpt-2"))
        .entries().values().stream().mapToLong(io.muster.proto.tf.BundleEntryProto::getSize).sum();
    Result r = run(Map.of(), "checkpoint", "verify", tmp.toString());
    assertEquals(0, r.code(), r.err());
    assertEquals("ckpt-2: 3 tensors, " + bytes + " bytes, every CRC32C matches\n", r.text());
    assertEquals("", r.err());
  }

  @Test
  void checkpointVerifyNamesEachCorruptTensorAndExitsOne(@org.junit.jupiter.api.io.TempDir java.nio.file.Path tmp)
      throws Exception {
    twoCheckpoints(tmp);
    flipAByteOf(tmp, "ckpt-2", "dense/kernel");

    Result r = run(Map.of(), "checkpoint", "verify", tmp.toString());
    assertEquals(1, r.code(), r.err());
    assertEquals("", r.text());
    List<String> lines = r.err().lines().toList();
    assertEquals(2, lines.size(), r.err());
    assertEquals("muster checkpoint verify: ckpt-2 is corrupt: 1 of 3 tensors do not read back intact: dense/kernel",
        lines.get(0));
    assertTrue(lines.get(1).startsWith("  dense/kernel: Checksum does not match for dense/kernel in "), lines.get(1));

    // the checkpoint before it is intact, and can be named
    Result older = run(Map.of(), "checkpoint", "verify", tmp.toString(), "ckpt-1");
    assertEquals(0, older.code(), older.err());
    assertTrue(older.text().startsWith("ckpt-1: 3 tensors, "), older.text());
  }

  @Test
  void checkpointVerifyOfANameNotThereIsAUsageError(@org.junit.jupiter.api.io.TempDir java.nio.file.Path tmp)
      throws Exception {
    twoCheckpoints(tmp);
    Result r = run(Map.of(), "checkpoint", "verify", tmp.toString(), "ckpt-9");
    assertEquals(2, r.code());
    assertTrue(r.err().startsWith("muster checkpoint: no checkpoint ckpt-9 in "), r.err());
    assertEquals(1, r.err().lines().count(), r.err());
  }

  @Test
  void checkpointOfAStateFileThatIsNotOneOrOfAFileIsOneLine(@org.junit.jupiter.api.io.TempDir java.nio.file.Path tmp)
      throws Exception {
    java.nio.file.Files.writeString(tmp.resolve("checkpoint"), "{\"not\": \"a checkpoint state\"}\n");
    String qualified = "file:" + tmp;
    for (String command : List.of("ls", "verify")) {
      Result r = run(Map.of(), "checkpoint", command, tmp.toString());
      assertEquals(1, r.code(), r.err());
      assertTrue(r.err().startsWith("muster checkpoint: unreadable checkpoint state " + qualified + "/checkpoint: "),
          r.err());
      assertTrue(r.err().endsWith("; it is not TensorFlow's checkpoint state file\n"), r.err());
      assertEquals(1, r.err().lines().count(), r.err());
    }
    java.nio.file.Path file = java.nio.file.Files.writeString(tmp.resolve("rows.csv"), "a,b\n");
    Result r = run(Map.of(), "checkpoint", "ls", file.toString());
    assertEquals(2, r.code(), r.err());
    assertEquals("muster checkpoint: file:" + file + " is a file; give the checkpoint directory (the one holding the "
        + "'checkpoint' state file)\n", r.err());
  }

  @Test
  void everyCliCommandPrintsItsUsageOnHelp() {
    for (String command : List.of("cluster", "check", "server-def", "checkpoint", "events", "status", "kill",
        "yarn-local")) {
      Result r = run(Map.of(), command, "--help");
      assertEquals(0, r.code(), command + ": " + r.err());
      assertTrue(r.text().startsWith("usage: muster " + command), r.text());
    }
  }

  @Test
  void checkpointVerifyOfADirectoryWithoutACheckpointIsOneLineExitOne(@org.junit.jupiter.api.io.TempDir java.nio.file.Path tmp) {
    Result r = run(Map.of(), "checkpoint", "verify", tmp.toString());
    assertEquals(1, r.code(), r.err());
    assertEquals("muster checkpoint: no complete checkpoint in file:" + tmp + " to verify\n", r.err());
  }
}
