package io.muster.data;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import com.google.protobuf.ByteString;
import io.muster.proto.tf.BytesList;
import io.muster.proto.tf.Example;
import io.muster.proto.tf.Feature;
import io.muster.proto.tf.Features;
import io.muster.proto.tf.FloatList;
import io.muster.proto.tf.Int64List;
import java.io.BufferedOutputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.tensorflow.Graph;
import org.tensorflow.Operand;
import org.tensorflow.Result;
import org.tensorflow.Session;
import org.tensorflow.ndarray.Shape;
import org.tensorflow.ndarray.buffer.DataBuffers;
import org.tensorflow.op.Ops;
import org.tensorflow.op.io.ParseSingleExample;
import org.tensorflow.types.TFloat32;
import org.tensorflow.types.TInt64;
import org.tensorflow.types.TString;

/**
 * TFRecord shards of tf.train.Example as the Spark external-command mode writes them, read by
 * real TensorFlow (2.18 via TensorFlow Java, which lives in this module's test scope):
 * {@code TFRecordDataset} accepts the framing and CRCs, {@code ParseSingleExample} the features.
 */
class ExampleTensorFlowTest {

  @TempDir Path dir;

  private static Example example(long id, float x, String name, float... vec) {
    FloatList.Builder v = FloatList.newBuilder();
    for (float f : vec) {
      v.addValue(f);
    }
    return Example.newBuilder().setFeatures(Features.newBuilder()
        .putFeature("id", Feature.newBuilder().setInt64List(Int64List.newBuilder().addValue(id)).build())
        .putFeature("x", Feature.newBuilder().setFloatList(FloatList.newBuilder().addValue(x)).build())
        .putFeature("name", Feature.newBuilder().setBytesList(BytesList.newBuilder()
            .addValue(ByteString.copyFromUtf8(name))).build())
        .putFeature("vec", Feature.newBuilder().setFloatList(v).build())).build();
  }

  @Test
  void tensorFlowReadsTheShardAndParsesEveryFeature() throws Exception {
    assumeTrue(System.getProperty("os.name").startsWith("Linux") && System.getProperty("os.arch").equals("amd64"),
        "TensorFlow Java's native library is only on the test class path for linux-x86_64");
    List<Example> written = List.of(example(Long.MIN_VALUE, 1.5f, "ñame", 1f, 2f, 3f), example(7, -0f, ""),
        example(Long.MAX_VALUE, Float.NaN, "z", Float.MAX_VALUE));
    Path file = dir.resolve("part-00000-of-00001.tfrecord");
    try (TfRecordWriter out = new TfRecordWriter(new BufferedOutputStream(Files.newOutputStream(file)))) {
      for (Example e : written) {
        out.write(e.toByteArray());
      }
    }

    List<byte[]> records = readWithTfRecordDataset(file);
    assertEquals(written.size(), records.size());
    for (int i = 0; i < written.size(); i++) {
      assertArrayEquals(written.get(i).toByteArray(), records.get(i), "record " + i + " as TensorFlow read it");
      parseAndCompare(records.get(i), written.get(i));
    }
  }

  private static List<byte[]> readWithTfRecordDataset(Path file) {
    try (Graph g = new Graph(); Session session = new Session(g)) {
      Ops tf = Ops.create(g);
      var dataset = tf.data.tfRecordDataset(tf.constant(StandardCharsets.UTF_8, new String[] {file.toString()}), tf.constant(""),
          tf.constant(0L), tf.constant(new long[0]));
      var batched = tf.data.batchDataset(dataset, tf.constant(100L), tf.constant(false), List.of(TString.class),
          List.of(Shape.of(-1)));
      var all = tf.data.datasetToSingleElement(batched, List.of(TString.class), List.of(Shape.of(-1)));
      try (Result result = session.runner().fetch(all.components().get(0)).run()) {
        TString strings = (TString) result.get(0);
        List<byte[]> out = new ArrayList<>();
        for (long i = 0; i < strings.shape().size(0); i++) {
          out.add(strings.asBytes().getObject(i));
        }
        return out;
      }
    }
  }

  /** id, x and name as FixedLenFeature([]), vec as VarLenFeature(float32). */
  private static void parseAndCompare(byte[] record, Example expected) {
    var features = expected.getFeatures().getFeatureMap();
    try (Graph g = new Graph(); Session session = new Session(g)) {
      Ops tf = Ops.create(g);
      var serialized = tf.placeholder(TString.class);
      List<Operand<?>> defaults = List.of(tf.constant(0L), tf.constant(""), tf.constant(0f));
      ParseSingleExample parsed = tf.io.parseSingleExample(serialized, defaults, 1L, List.of("vec"),
          List.of("id", "name", "x"), List.of(TFloat32.class), List.of(Shape.scalar(), Shape.scalar(), Shape.scalar()));
      TString input = TString.tensorOfBytes(Shape.scalar(), DataBuffers.ofObjects(record));
      Session.Runner runner = session.runner().feed(serialized, input);
      parsed.denseValues().forEach(runner::fetch);
      runner.fetch(parsed.sparseValues().get(0));
      try (input; Result result = runner.run()) {
        assertEquals(features.get("id").getInt64List().getValue(0), ((TInt64) result.get(0)).getLong());
        assertEquals(features.get("name").getBytesList().getValue(0).toString(StandardCharsets.UTF_8),
            new String(((TString) result.get(1)).asBytes().getObject(), StandardCharsets.UTF_8));
        assertEquals(Float.floatToRawIntBits(features.get("x").getFloatList().getValue(0)),
            Float.floatToRawIntBits(((TFloat32) result.get(2)).getFloat()));
        TFloat32 vec = (TFloat32) result.get(3);
        List<Float> values = new ArrayList<>();
        for (long i = 0; i < vec.shape().size(0); i++) {
          values.add(vec.getFloat(i));
        }
        assertEquals(features.get("vec").getFloatList().getValueList(), values);
      }
    }
  }
}
