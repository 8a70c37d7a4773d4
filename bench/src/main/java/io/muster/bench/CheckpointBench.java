package io.muster.bench;

import io.muster.checkpoint.CheckpointManager;
import io.muster.checkpoint.Tensor;
import io.muster.checkpoint.WritePolicy;
import io.muster.cluster.Json;
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
 * float32 tensors; each figure is the median (and the best) of 8 rounds after one warm-up round, the
 * checkpoint written first in every other round. A second read baseline reads the same stream into
 * a new array per tensor, which is what any restore returning tensors has to do; restore-into
 * restores into arrays the process already has, as TensorFlow restores into existing variables.
 */
final class CheckpointBench {
  private static final int TENSOR_BYTES = 8 << 20;
  private static final int ROUNDS = 8;

  private CheckpointBench() {}

  static void run(List<String> args) throws Exception {
    List<Integer> sizes = args.isEmpty() ? List.of(64, 512) : args.stream().map(Integer::parseInt).toList();
    Configuration conf = new Configuration();
    // MUSTER_BENCH_DFS_DIR=/dev/shm/... puts the datanode in memory, leaving only software costs.
    File base = new File(System.getenv().getOrDefault("MUSTER_BENCH_DFS_DIR", "target/bench-minidfs")).getAbsoluteFile();
    conf.set(MiniDFSCluster.HDFS_MINIDFS_BASEDIR, base.getPath());
    conf.set("dfs.namenode.http-address", "127.0.0.1:0");
    conf.set("dfs.datanode.address", "127.0.0.1:0");
    conf.set("dfs.datanode.http.address", "127.0.0.1:0");
    conf.set("dfs.datanode.ipc.address", "127.0.0.1:0");
    if (System.getenv("MUSTER_BENCH_COMPLETE_DELAY_MS") != null) {
      conf.set("dfs.client.block.write.locateFollowingBlock.initial.delay.ms", System.getenv("MUSTER_BENCH_COMPLETE_DELAY_MS"));
    }
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
    List<Double> plainWrite = new ArrayList<>();
    List<Double> saveWrite = new ArrayList<>();
    List<Double> plainRead = new ArrayList<>();
    List<Double> freshRead = new ArrayList<>();
    List<Double> restore = new ArrayList<>();
    List<Double> restoreInto = new ArrayList<>();
    for (int round = -1; round < ROUNDS; round++) { // round -1 warms up the JIT and the HDFS pipeline
      Path dir = new Path("/bench-" + mib + "-" + round);
      Path plain = new Path(dir, "plain.bin");
      CheckpointManager manager = new CheckpointManager(fs, new Path(dir, "ckpt"), WritePolicy.SINGLE_WORKER,
          CheckpointManager.Options.DEFAULTS);
      // Whichever writes second pays for the first one's dirty pages: alternate the order.
      Path saved = null;
      for (boolean checkpointFirst : round % 2 == 0 ? new boolean[] {true, false} : new boolean[] {false, true}) {
        long t0 = System.nanoTime();
        if (checkpointFirst) {
          saved = manager.save(model);
          record(saveWrite, round, t0);
        } else {
          try (FSDataOutputStream out = fs.create(plain, true)) {
            for (Tensor t : model.values()) {
              out.write(t.data());
            }
          }
          record(plainWrite, round, t0);
        }
      }
      long t0 = System.nanoTime();
      byte[] buffer = new byte[TENSOR_BYTES];
      try (InputStream in = fs.open(plain)) {
        while (in.readNBytes(buffer, 0, buffer.length) > 0) {
          // read everything
        }
      }
      record(plainRead, round, t0);
      // the same read into a new array per tensor, as any restore that returns tensors must
      t0 = System.nanoTime();
      List<byte[]> fresh = new ArrayList<>();
      try (InputStream in = fs.open(plain)) {
        for (int k = 0; k < model.size(); k++) {
          fresh.add(in.readNBytes(TENSOR_BYTES));
        }
      }
      record(freshRead, round, t0);
      fresh.clear();
      t0 = System.nanoTime();
      Map<String, Tensor> back = manager.restore(saved);
      record(restore, round, t0);
      if (back.size() != model.size()) {
        throw new IllegalStateException("restored " + back.size() + " of " + model.size() + " tensors");
      }
      back = null;
      t0 = System.nanoTime();
      manager.restoreInto(saved, variables);
      record(restoreInto, round, t0);
      fs.delete(dir, true);
    }
    double mb = bytes / 1e6;
    Map<String, Object> line = new LinkedHashMap<>();
    line.put("bench", "checkpoint");
    line.put("model_mib", mib);
    line.put("save_mb_s", round(mb / Bench.median(saveWrite)));
    line.put("plain_write_mb_s", round(mb / Bench.median(plainWrite)));
    line.put("save_ratio", round(Bench.median(plainWrite) / Bench.median(saveWrite)));
    line.put("save_ratio_best", round(best(plainWrite) / best(saveWrite)));
    line.put("restore_mb_s", round(mb / Bench.median(restore)));
    line.put("plain_read_mb_s", round(mb / Bench.median(plainRead)));
    line.put("restore_ratio", round(Bench.median(plainRead) / Bench.median(restore)));
    line.put("restore_ratio_best", round(best(plainRead) / best(restore)));
    line.put("restore_into_mb_s", round(mb / Bench.median(restoreInto)));
    line.put("restore_into_ratio", round(Bench.median(plainRead) / Bench.median(restoreInto)));
    line.put("restore_into_ratio_best", round(best(plainRead) / best(restoreInto)));
    line.put("fresh_read_mb_s", round(mb / Bench.median(freshRead)));
    line.put("restore_to_fresh_read_ratio", round(Bench.median(freshRead) / Bench.median(restore)));
    System.out.println(Json.write(line));
    System.out.flush();
  }

  private static void record(List<Double> times, int round, long start) {
    if (round >= 0) {
      times.add((System.nanoTime() - start) / 1e9);
    }
  }

  private static double best(List<Double> values) {
    return values.stream().mapToDouble(Double::doubleValue).min().orElseThrow();
  }

  private static double round(double v) {
    return Math.round(v * 100) / 100.0;
  }
}
