package io.muster.bench;

import io.muster.checkpoint.CheckpointClient;
import io.muster.checkpoint.CheckpointManager;
import io.muster.checkpoint.Tensor;
import io.muster.checkpoint.WritePolicy;
import io.muster.internal.Json;
import java.io.File;
import java.io.IOException;
import java.io.InputStream;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FSDataOutputStream;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.hdfs.MiniDFSCluster;

/**
 * {@code muster bench checkpoint [MiB...]}: checkpoint save and restore throughput to a one-node
 * MiniDFSCluster, as a ratio to writing and reading the same bytes with a plain
 * {@code FileSystem.create}/{@code open} stream in the same run. Each model is split into 8 MiB
 * float32 tensors. Each round ({@value #ROUNDS}, after one warm-up round) saves once and writes the
 * plain file once through the caller's client and once through {@link CheckpointClient}, then
 * reads {@value #READS} times each: the plain file into one reused buffer, the plain file into a
 * new array per tensor (what any restore returning tensors has to do), {@code restore}, and
 * {@code restoreInto} (into arrays the process already has, as TensorFlow restores into existing
 * variables). Throughput is over the median time; a ratio is the median over the rounds of the
 * round's own ratio.
 */
final class CheckpointBench {
  private static final int TENSOR_BYTES = 8 << 20;
  private static final int ROUNDS = 9;
  private static final int READS = 5;

  private CheckpointBench() {}

  /** The benchmark as its arguments ask (checkpoint sizes in MiB), checked first. */
  static Bench.Job parse(List<String> args) {
    List<Integer> sizes = args.isEmpty() ? List.of(64, 512) : args.stream()
        .map(a -> Bench.positive(a, (a.startsWith("--") ? "unknown argument '" + a + "'; " : "")
            + "the checkpoint sizes must be positive integers (MiB), was '" + a + "'"))
        .toList();
    return () -> run(sizes);
  }

  private static void run(List<Integer> sizes) throws Exception {
    Configuration conf = new Configuration();
    // MUSTER_BENCH_DFS_DIR=/dev/shm/... puts the datanode in memory, leaving only software costs.
    File base = new File(System.getenv().getOrDefault("MUSTER_BENCH_DFS_DIR", "target/bench-minidfs")).getAbsoluteFile();
    conf.set(MiniDFSCluster.HDFS_MINIDFS_BASEDIR, base.getPath());
    conf.set("dfs.namenode.http-address", "127.0.0.1:0");
    conf.set("dfs.datanode.address", "127.0.0.1:0");
    conf.set("dfs.datanode.http.address", "127.0.0.1:0");
    conf.set("dfs.datanode.ipc.address", "127.0.0.1:0");
    MiniDFSCluster cluster = new MiniDFSCluster.Builder(conf).numDataNodes(1).build();
    try {
      cluster.waitActive();
      FileSystem fs = cluster.getFileSystem();
      for (int mib : sizes) {
        measure(fs, mib);
      }
    } finally {
      cluster.shutdown();
    }
  }

  private static void measure(FileSystem fs, int mib) throws IOException {
    Map<String, Tensor> model = new LinkedHashMap<>();
    Map<String, float[]> variables = new LinkedHashMap<>(); // the training process's own arrays
    Random random = new Random(mib);
    long bytes = (long) mib << 20;
    for (int i = 0; (long) i * TENSOR_BYTES < bytes; i++) {
      float[] values = new float[TENSOR_BYTES / 4];
      for (int j = 0; j < values.length; j += 97) {
        values[j] = random.nextFloat();
      }
      model.put("layer" + i + "/kernel", Tensor.ofFloats(new long[] {values.length}, values));
      variables.put("layer" + i + "/kernel", new float[values.length]);
    }
    Timings timings = new Timings();
    FileSystem checkpointClient = CheckpointClient.of(fs);
    for (int round = -1; round < ROUNDS; round++) { // round -1 warms up the JIT and the HDFS pipeline
      Path dir = new Path("/bench-" + mib + "-" + round);
      Path plain = new Path(dir, "plain.bin");
      CheckpointManager manager = new CheckpointManager(fs, new Path(dir, "ckpt"), WritePolicy.SINGLE_WORKER,
          CheckpointManager.Options.DEFAULTS);
      Path[] saved = new Path[1];
      // The second plain stream goes through the client checkpoints use (CheckpointClient): the
      // save's ratio to it is what the format costs, its ratio to the first what the client saves.
      Map<String, Timed> writes = new LinkedHashMap<>();
      writes.put("save", () -> saved[0] = manager.save(model));
      writes.put("plain_write", () -> writePlain(fs, plain, model));
      writes.put("plain_write_checkpoint_client",
          () -> writePlain(checkpointClient, new Path(dir, "plain-2.bin"), model));
      timings.run(writes, round, 0);
      Map<String, Timed> reads = new LinkedHashMap<>();
      reads.put("plain_read", () -> readPlain(fs, plain));
      reads.put("fresh_read", () -> readFresh(fs, plain, model.size()));
      reads.put("restore", () -> {
        if (manager.restore(saved[0]).size() != model.size()) {
          throw new IllegalStateException("restore returned a different number of tensors");
        }
      });
      reads.put("restore_into", () -> manager.restoreInto(saved[0], variables));
      for (int rep = 0; rep < READS; rep++) {
        timings.run(reads, round, rep);
      }
      manager.close();
      fs.delete(dir, true);
    }
    double mb = bytes / 1e6;
    Map<String, Object> line = new LinkedHashMap<>();
    line.put("bench", "checkpoint");
    line.put("model_mib", mib);
    for (String name : timings.names()) {
      line.put(name + "_mb_s", round(mb / timings.median(name)));
    }
    line.put("save_ratio", timings.ratio("plain_write", "save"));
    line.put("save_to_checkpoint_client_ratio", timings.ratio("plain_write_checkpoint_client", "save"));
    line.put("restore_ratio", timings.ratio("plain_read", "restore"));
    line.put("restore_into_ratio", timings.ratio("plain_read", "restore_into"));
    line.put("restore_to_fresh_read_ratio", timings.ratio("fresh_read", "restore"));
    System.out.println(Json.write(line));
    System.out.flush();
  }

  /**
   * Seconds per measurement and round. Ratios pair each round's baseline with the same round's
   * measurement (these machines drift over a run) and are the median over the rounds.
   */
  private static final class Timings {
    private final Map<String, List<List<Double>>> seconds = new LinkedHashMap<>();

    /**
     * Runs each once, in an order that rotates with the round and {@code turn} so that each
     * follows each other equally often (whichever writes later pays for the earlier ones' dirty
     * pages); a collection before each keeps one's garbage out of the next one's time.
     */
    void run(Map<String, Timed> timed, int round, int turn) throws IOException {
      List<String> names = new ArrayList<>(timed.keySet());
      for (int k = 0; k < names.size(); k++) {
        String name = names.get((k + turn + Math.max(round, 0)) % names.size());
        System.gc();
        long start = System.nanoTime();
        timed.get(name).run();
        double elapsed = (System.nanoTime() - start) / 1e9;
        if (round >= 0) {
          List<List<Double>> rounds = seconds.computeIfAbsent(name, n -> new ArrayList<>());
          while (rounds.size() <= round) {
            rounds.add(new ArrayList<>());
          }
          rounds.get(round).add(elapsed);
        }
      }
    }

    java.util.Set<String> names() {
      return seconds.keySet();
    }

    double median(String name) {
      return Bench.median(seconds.get(name).stream().flatMap(List::stream).toList());
    }

    double ratio(String baseline, String measured) {
      List<Double> perRound = new ArrayList<>();
      for (int r = 0; r < seconds.get(baseline).size(); r++) {
        perRound.add(Bench.median(seconds.get(baseline).get(r)) / Bench.median(seconds.get(measured).get(r)));
      }
      return round(Bench.median(perRound));
    }
  }

  private interface Timed {
    void run() throws IOException;
  }

  private static void writePlain(FileSystem fs, Path file, Map<String, Tensor> model) throws IOException {
    try (FSDataOutputStream out = fs.create(file, true)) {
      for (Tensor t : model.values()) {
        out.write(t.data());
      }
    }
  }

  private static void readPlain(FileSystem fs, Path file) throws IOException {
    byte[] buffer = new byte[TENSOR_BYTES];
    try (InputStream in = fs.open(file)) {
      while (in.readNBytes(buffer, 0, buffer.length) > 0) {
        // read everything into one reused buffer
      }
    }
  }

  /** The same read into a new array per tensor, as any restore that returns tensors must. */
  private static void readFresh(FileSystem fs, Path file, int tensors) throws IOException {
    List<byte[]> fresh = new ArrayList<>();
    try (InputStream in = fs.open(file)) {
      for (int k = 0; k < tensors; k++) {
        fresh.add(in.readNBytes(TENSOR_BYTES));
      }
    }
  }

  private static double round(double v) {
    return Math.round(v * 100) / 100.0;
  }
}
