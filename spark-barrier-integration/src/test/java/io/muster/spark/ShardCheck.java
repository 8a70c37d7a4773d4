package io.muster.spark;

import io.muster.cluster.TfConfig;
import io.muster.data.ExampleSchema;
import io.muster.data.TfRecordReader;
import io.muster.proto.tf.Example;
import io.muster.proto.tf.Feature;
import java.io.BufferedInputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;

/**
 * The external command of the tests, run as a real child JVM: it reads TF_CONFIG and its TFRecord
 * shard the way a training script would, prints every row in a canonical form (the test compares
 * them with the DataFrame), and the chief writes a result file. Modes: {@code check},
 * {@code fail-worker-1} (worker 1 fails with 40 stderr lines and exit code 3, the others sleep; on
 * attempt 0 only, with exit code 75 asking for a re-run, with {@code fail-once}), {@code sleep DIR} (write the pid, then sleep).
 */
public final class ShardCheck {
  public static void main(String[] args) throws Exception {
    Map<String, String> env = System.getenv();
    TfConfig config = TfConfig.fromEnvironment(env);
    int index = config.requireTask().index();
    String mode = args[0];
    System.out.println("tf_config " + env.get("TF_CONFIG"));
    System.out.println("cuda [" + env.get("CUDA_VISIBLE_DEVICES") + "] attempt " + env.get("MUSTER_ATTEMPT")
        + " chief " + env.get("MUSTER_IS_CHIEF") + " of " + env.get("MUSTER_NUM_WORKERS"));
    System.err.println("a line on stderr from worker " + index);
    boolean failNow = mode.equals("fail-worker-1") || (mode.equals("fail-once") && env.get("MUSTER_ATTEMPT").equals("0"));
    if (failNow || mode.equals("sleep")) {
      if (index == 1 && failNow) {
        awaitOthers(Path.of(args[1]), Integer.parseInt(env.get("MUSTER_NUM_WORKERS")));
        for (int i = 1; i <= 40; i++) {
          System.err.println("boom line " + i);
        }
        System.exit(mode.equals("fail-once") ? io.muster.launch.Rerun.EX_TEMPFAIL : 3); // fail-once asks for a re-run
      }
      if (mode.equals("sleep") || env.get("MUSTER_ATTEMPT").equals("0")) {
        Path dir = Path.of(args[1]);
        Files.writeString(dir.resolve("pid-" + env.get("MUSTER_ATTEMPT") + "-" + index),
            Long.toString(ProcessHandle.current().pid()));
        Thread.sleep(600_000);
      }
    }
    String files = env.get("MUSTER_DATA_FILES");
    if (files == null) {
      System.out.println("no data");
    } else {
      ExampleSchema schema = ExampleSchema.parse(Files.readString(Path.of(env.get("MUSTER_SCHEMA_FILE"))));
      long rows = 0;
      for (String file : files.split(",")) {
        try (TfRecordReader reader = new TfRecordReader(new BufferedInputStream(Files.newInputStream(Path.of(file))),
            file)) {
          Optional<byte[]> record;
          while ((record = reader.next()).isPresent()) {
            System.out.println("row " + describe(Example.parseFrom(record.get()), schema));
            rows++;
          }
        }
      }
      System.out.println("shard rows " + rows);
    }
    if (index == 0) {
      Files.writeString(Path.of(env.get("MUSTER_RESULT_FILE")), "chief of attempt " + env.get("MUSTER_ATTEMPT"));
    }
  }

  /** Worker 1 fails only once the others sleep, so the test sees the others ended, not never started. */
  private static void awaitOthers(Path dir, int workers) throws InterruptedException {
    long deadline = System.nanoTime() + 30_000_000_000L;
    for (int i = 0; i < workers; i++) {
      while (i != 1 && !Files.exists(dir.resolve("pid-0-" + i)) && System.nanoTime() < deadline) {
        Thread.sleep(20);
      }
    }
  }

  /** {@code name=value} per schema column, lists in brackets, {@code -} for a missing feature. */
  static String describe(Example example, ExampleSchema schema) {
    List<String> parts = new ArrayList<>();
    for (ExampleSchema.Column column : schema.columns()) {
      Feature f = example.getFeatures().getFeatureMap().get(column.name());
      List<String> values = new ArrayList<>();
      if (f != null) {
        switch (column.kind()) {
          case INT64 -> f.getInt64List().getValueList().forEach(v -> values.add(Long.toString(v)));
          case FLOAT -> f.getFloatList().getValueList().forEach(v -> values.add(Float.toString(v)));
          case BYTES -> f.getBytesList().getValueList().forEach(v -> values.add(v.toStringUtf8()));
        }
      }
      String value = f == null ? "-" : column.list() ? values.toString() : values.size() == 1 ? values.get(0)
          : "NOT-ONE-VALUE" + values;
      parts.add(column.name() + "=" + value);
    }
    return String.join(" ", parts);
  }
}
