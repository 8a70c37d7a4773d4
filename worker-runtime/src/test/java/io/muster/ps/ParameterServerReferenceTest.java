package io.muster.ps;

import static org.junit.jupiter.api.Assertions.assertEquals;

import io.muster.internal.Json;
import io.muster.testing.PythonTensorFlow;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The partitioners' shard counts and the server-side optimizers' steps, judged by real TensorFlow
 * 2.21 (its {@code tf.distribute.experimental.partitioners} and Keras 3 optimizers), in one Python
 * run for the whole class.
 */
class ParameterServerReferenceTest {

  private record PartitionerCase(String kind, long[] shape, long bytes, int count, Partitioner ours) {}

  private static final List<PartitionerCase> PARTITIONERS = List.of(
      new PartitionerCase("fixed", new long[] {10, 4}, 0, 3, Partitioner.fixedShards(3)),
      new PartitionerCase("fixed", new long[] {2, 4}, 0, 5, Partitioner.fixedShards(5)),
      new PartitionerCase("min", new long[] {6, 1}, 4, 2, Partitioner.minSize(4, 2)),
      new PartitionerCase("min", new long[] {6, 1}, 4, 10, Partitioner.minSize(4, 10)),
      new PartitionerCase("min", new long[] {1000, 100}, 256 << 10, 1, Partitioner.minSize()),
      new PartitionerCase("min", new long[] {1000, 100}, 64 << 10, 8, Partitioner.minSize(64 << 10, 8)),
      new PartitionerCase("min", new long[] {1000, 100}, 100_000, 100, Partitioner.minSize(100_000, 100)),
      new PartitionerCase("max", new long[] {6, 2}, 16, 0, Partitioner.maxSize(16)),
      new PartitionerCase("max", new long[] {6, 2}, 4, 0, Partitioner.maxSize(4)),
      new PartitionerCase("max", new long[] {1000, 100}, 100_000, 0, Partitioner.maxSize(100_000)),
      new PartitionerCase("max", new long[] {1000, 100}, 100_000, 3, Partitioner.maxSize(100_000, 3)),
      new PartitionerCase("max", new long[] {7, 3}, 30, 0, Partitioner.maxSize(30)));

  private static final List<Optimizer> OPTIMIZERS = List.of(
      Optimizer.sgd(0.1f),
      Optimizer.momentum(0.1f, 0.9f, false),
      Optimizer.momentum(0.05f, 0.8f, true),
      Optimizer.adagrad(0.1f),
      Optimizer.adam(0.01f));

  private static final float[] INITIAL = {0.5f, -1.5f, 2.0f, 0.0f};
  private static final float[][] GRADIENTS = {
      {0.1f, -0.2f, 0.3f, 1.0f}, {0.5f, 0.5f, -0.5f, -1.0f}, {-0.25f, 0.0f, 2.0f, 0.125f}, {1e-3f, 4f, -3f, 0.5f}};

  private static Map<?, ?> tensorFlow;

  @BeforeAll
  static void askTensorFlow(@TempDir Path tmp) throws Exception {
    Path python = PythonTensorFlow.python();
    Path script = PythonTensorFlow.script("ps_reference.py", tmp);
    List<Object> partitioners = new ArrayList<>();
    for (PartitionerCase c : PARTITIONERS) {
      Map<String, Object> p = new LinkedHashMap<>();
      p.put("kind", c.kind());
      p.put("shape", longs(c.shape()));
      p.put("bytes", c.bytes());
      p.put("num_shards", c.count());
      p.put("max_shards", c.count());
      partitioners.add(p);
    }
    List<Object> optimizers = new ArrayList<>();
    for (Optimizer o : OPTIMIZERS) {
      Map<String, Object> p = new LinkedHashMap<>();
      p.put("kind", o.kind().name());
      p.put("learning_rate", (double) o.learningRate());
      p.put("momentum", (double) o.momentum());
      p.put("nesterov", o.nesterov());
      p.put("initial", floats(INITIAL));
      List<Object> grads = new ArrayList<>();
      for (float[] g : GRADIENTS) {
        grads.add(floats(g));
      }
      p.put("gradients", grads);
      optimizers.add(p);
    }
    String request = Json.write(Map.of("partitioners", partitioners, "optimizers", optimizers));
    Path out = tmp.resolve("answer.json");
    Process p = new ProcessBuilder(python.toString(), script.toString()).redirectOutput(out.toFile())
        .redirectError(tmp.resolve("stderr.txt").toFile()).start();
    p.getOutputStream().write(request.getBytes(StandardCharsets.UTF_8));
    p.getOutputStream().close();
    if (!p.waitFor(3, TimeUnit.MINUTES) || p.exitValue() != 0) {
      p.destroyForcibly();
      throw new AssertionError("ps_reference.py failed: " + Files.readString(tmp.resolve("stderr.txt")));
    }
    tensorFlow = (Map<?, ?>) Json.parse(Files.readString(out).trim());
  }

  @Test
  void partitionersGiveTensorFlowsShardCounts() {
    List<?> expected = (List<?>) tensorFlow.get("partitions");
    for (int i = 0; i < PARTITIONERS.size(); i++) {
      PartitionerCase c = PARTITIONERS.get(i);
      assertEquals(((Number) expected.get(i)).intValue(), c.ours().shards(c.shape()),
          c.kind() + " partitioner (" + c.bytes() + " bytes, " + c.count() + ") on " + java.util.Arrays.toString(c.shape()));
    }
  }

  @Test
  void serverSideOptimizersTakeKerasStepsInFloat32() {
    List<?> expected = (List<?>) tensorFlow.get("optimizers");
    for (int o = 0; o < OPTIMIZERS.size(); o++) {
      HostedVariable v = new HostedVariable("v", new long[] {INITIAL.length}, OPTIMIZERS.get(o));
      v.assign(INITIAL.clone());
      List<?> steps = (List<?>) expected.get(o);
      for (int step = 0; step < GRADIENTS.length; step++) {
        v.applyGradient(GRADIENTS[step]);
        List<?> tf = (List<?>) steps.get(step);
        float[] ours = v.read().values();
        for (int i = 0; i < ours.length; i++) {
          float want = ((Number) tf.get(i)).floatValue();
          assertEquals(want, ours[i], 2e-6f * Math.max(1f, Math.abs(want)),
              OPTIMIZERS.get(o) + " step " + (step + 1) + " element " + i);
        }
      }
    }
  }

  private static List<Object> longs(long[] values) {
    List<Object> out = new ArrayList<>();
    for (long v : values) {
      out.add(v);
    }
    return out;
  }

  private static List<Object> floats(float[] values) {
    List<Object> out = new ArrayList<>();
    for (float v : values) {
      out.add((double) v);
    }
    return out;
  }
}
