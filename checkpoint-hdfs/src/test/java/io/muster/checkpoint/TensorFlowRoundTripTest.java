package io.muster.checkpoint;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.muster.proto.tf.DataType;
import java.nio.file.Files;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.tensorflow.Graph;
import org.tensorflow.Operand;
import org.tensorflow.Result;
import org.tensorflow.Session;
import org.tensorflow.ndarray.Shape;
import org.tensorflow.ndarray.buffer.DataBuffers;
import org.tensorflow.op.Ops;
import org.tensorflow.op.train.Restore;
import org.tensorflow.op.train.Save;
import org.tensorflow.types.TBool;
import org.tensorflow.types.TFloat32;
import org.tensorflow.types.TFloat64;
import org.tensorflow.types.TInt32;
import org.tensorflow.types.TInt64;
import org.tensorflow.types.TString;
import org.tensorflow.types.family.TType;

/**
 * Checkpoints against real TensorFlow (2.18, through TensorFlow Java's SaveV2 and RestoreV2 ops):
 * TensorFlow reads what Muster writes, Muster reads what TensorFlow writes, values bit-identical,
 * and for the same tensors in the same order the files are byte-identical.
 */
class TensorFlowRoundTripTest {

  @TempDir
  java.nio.file.Path tmp;

  @BeforeAll
  static void tensorFlowRunsHere() {
    assumeTrue(System.getProperty("os.name").startsWith("Linux") && System.getProperty("os.arch").equals("amd64"),
        "TensorFlow Java's native library is only on the test class path for linux-x86_64");
  }

  private static Map<String, Tensor> tensors() {
    Map<String, Tensor> t = new LinkedHashMap<>();
    t.put("zeta/w", Tensor.ofFloats(new long[] {2, 3}, 1.5f, -0f, Float.MIN_VALUE, Float.MAX_VALUE, Float.NaN, 0.1f));
    t.put("alpha", Tensor.ofDoubles(new long[0], Math.PI));
    t.put("mid/sub/bias", Tensor.ofLongs(new long[] {4}, Long.MIN_VALUE, -1, 0, Long.MAX_VALUE));
    t.put("layer1/count", Tensor.ofInts(new long[] {3}, Integer.MIN_VALUE, 7, Integer.MAX_VALUE));
    t.put("flags", Tensor.ofBooleans(new long[] {3}, true, false, true));
    t.put("名/words", Tensor.ofStrings(new long[] {3}, "", "hello", "ü"));
    t.put("empty", Tensor.ofFloats(new long[] {0, 3}));
    return t;
  }

  private static Class<? extends TType> tfType(DataType dtype) {
    return switch (dtype) {
      case DT_FLOAT -> TFloat32.class;
      case DT_DOUBLE -> TFloat64.class;
      case DT_INT32 -> TInt32.class;
      case DT_INT64 -> TInt64.class;
      case DT_BOOL -> TBool.class;
      case DT_STRING -> TString.class;
      default -> throw new IllegalArgumentException(dtype.toString());
    };
  }

  private static org.tensorflow.Tensor toTf(Tensor t) {
    Shape shape = Shape.of(t.shape());
    if (t.dtype() == DataType.DT_STRING) {
      return TString.tensorOfBytes(shape, DataBuffers.ofObjects(t.strings().toArray(new byte[0][])));
    }
    return org.tensorflow.Tensor.of(tfType(t.dtype()), shape, DataBuffers.of(t.data(), true, false));
  }

  private static Tensor fromTf(org.tensorflow.Tensor t, DataType dtype) {
    long[] shape = t.shape().asArray();
    if (dtype == DataType.DT_STRING) {
      TString s = (TString) t;
      List<byte[]> values = new ArrayList<>();
      s.asBytes().scalars().forEach(v -> values.add(v.getObject()));
      return new Tensor(DataType.DT_STRING, shape, null, values);
    }
    byte[] bytes = new byte[(int) t.numBytes()];
    t.asRawTensor().data().read(bytes);
    return new Tensor(dtype, shape, bytes, null);
  }

  private static Operand<TString> names(Ops tf, Map<String, Tensor> tensors) {
    return tf.constantOf(TString.vectorOf(tensors.keySet().toArray(new String[0])));
  }

  /** Empty shape-and-slice strings: whole tensors. */
  private static Operand<TString> noSlices(Ops tf, int n) {
    return tf.constantOf(TString.vectorOf(java.util.Collections.nCopies(n, "").toArray(new String[0])));
  }

  @Test
  void tensorFlowRestoresWhatMusterWrites() throws Exception {
    FileSystem fs = FileSystem.getLocal(new Configuration()).getRawFileSystem();
    Path prefix = new Path(tmp.resolve("muster").toUri());
    Map<String, Tensor> written = tensors();
    BundleWriter.write(fs, prefix, written);

    try (Graph g = new Graph(); Session session = new Session(g)) {
      Ops tf = Ops.create(g);
      List<Class<? extends TType>> types = written.values().stream().<Class<? extends TType>>map(t -> tfType(t.dtype())).toList();
      Restore restore = Restore.create(tf.scope(), tf.constant(prefix.toUri().getPath()), names(tf, written),
          noSlices(tf, written.size()), types);
      Session.Runner runner = session.runner();
      restore.tensors().forEach(runner::fetch);
      try (Result result = runner.run()) {
        int i = 0;
        for (Map.Entry<String, Tensor> e : written.entrySet()) {
          assertEquals(e.getValue(), fromTf(result.get(i++), e.getValue().dtype()), e.getKey());
        }
      }
    }
  }

  @Test
  void musterReadsWhatTensorFlowWritesAndWritesTheSameBytes() throws Exception {
    FileSystem fs = FileSystem.getLocal(new Configuration()).getRawFileSystem();
    Map<String, Tensor> saved = tensors();
    Path tfPrefix = new Path(tmp.resolve("tf").toUri());
    try (Graph g = new Graph(); Session session = new Session(g)) {
      Ops tf = Ops.create(g);
      List<Operand<?>> values = new ArrayList<>();
      for (Tensor t : saved.values()) {
        values.add(tf.constantOf((TType) toTf(t)));
      }
      Save save = Save.create(tf.scope(), tf.constant(tfPrefix.toUri().getPath()), names(tf, saved),
          noSlices(tf, saved.size()), values);
      session.runner().addTarget(save).run();
    }
    Map<String, Tensor> read = BundleReader.open(fs, tfPrefix).readAll();
    assertEquals(saved.size(), read.size());
    saved.forEach((name, t) -> assertEquals(t, read.get(name), name));

    Path musterPrefix = new Path(tmp.resolve("muster-same").toUri());
    BundleWriter.write(fs, musterPrefix, saved);
    for (String suffix : new String[] {".index", ".data-00000-of-00001"}) {
      assertArrayEquals(Files.readAllBytes(java.nio.file.Path.of(tfPrefix.toUri().getPath() + suffix)),
          Files.readAllBytes(java.nio.file.Path.of(musterPrefix.toUri().getPath() + suffix)), suffix + " byte for byte");
    }
  }

  @Test
  void aDirectoryTensorFlowWroteIsListedAndRestored() throws Exception {
    FileSystem fs = FileSystem.getLocal(new Configuration()).getRawFileSystem();
    java.nio.file.Path dir = tmp.resolve("tf-dir");
    Files.createDirectories(dir);
    Map<String, Tensor> saved = tensors();
    try (Graph g = new Graph(); Session session = new Session(g)) {
      Ops tf = Ops.create(g);
      List<Operand<?>> values = new ArrayList<>();
      for (Tensor t : saved.values()) {
        values.add(tf.constantOf((TType) toTf(t)));
      }
      session.runner().addTarget(Save.create(tf.scope(), tf.constant(dir.resolve("ckpt-7").toString()),
          names(tf, saved), noSlices(tf, saved.size()), values)).run();
    }
    // the state file as Python's tf.train.CheckpointManager writes it (text_format)
    Files.writeString(dir.resolve("checkpoint"), "model_checkpoint_path: \"ckpt-7\"\n"
        + "all_model_checkpoint_paths: \"ckpt-7\"\nall_model_checkpoint_timestamps: 1700000000.5\n"
        + "last_preserved_timestamp: 1699999999.0\n");
    Path dirPath = new Path(dir.toUri());
    CheckpointManager manager = new CheckpointManager(fs, dirPath, WritePolicy.SINGLE_WORKER,
        CheckpointManager.Options.DEFAULTS);
    assertEquals(java.util.Optional.of(new Path(dirPath, "ckpt-7")), manager.latest());
    assertEquals(List.of(new Path(dirPath, "ckpt-7")), manager.checkpoints());
    Map<String, Tensor> read = manager.restore(manager.latest().orElseThrow());
    saved.forEach((name, t) -> assertEquals(t, read.get(name), name));
    assertEquals(new Path(dirPath, "ckpt-8"), manager.save(saved), "the numbering continues after TensorFlow's");
  }
}
