package io.muster.checkpoint;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.muster.proto.tf.DataType;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.util.HexFormat;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** The V2 bundle format against the bytes TensorFlow writes (reference/tf-checkpoint.md). */
class BundleTest {

  @TempDir
  java.nio.file.Path tmp;

  private FileSystem local() throws IOException {
    return FileSystem.getLocal(new Configuration()).getRawFileSystem();
  }

  private static String hex(byte[] b) {
    return HexFormat.ofDelimiter(" ").formatHex(b);
  }

  private Map<String, byte[]> rawIndex(Path prefix) throws IOException {
    byte[] file = Files.readAllBytes(java.nio.file.Path.of(Bundle.indexFile(prefix).toUri()));
    TreeMap<byte[], byte[]> table = Table.read(file, "test");
    Map<String, byte[]> out = new LinkedHashMap<>();
    table.forEach((k, v) -> out.put(new String(k, StandardCharsets.UTF_8), v));
    return out;
  }

  @Test
  void entriesAndHeaderAreTensorFlowsBytes() throws Exception {
    Path prefix = new Path(tmp.toUri().toString(), "ckpt-1");
    Map<String, Tensor> tensors = new LinkedHashMap<>();
    tensors.put("zeta/w", Tensor.ofFloats(new long[] {2, 3}, 1.5f, 2, 3, 4, 5, 6));
    tensors.put("alpha", Tensor.ofDoubles(new long[0], Math.PI));
    tensors.put("filler", new Tensor(DataType.DT_UINT8, new long[] {108}, new byte[108], null));
    tensors.put("empty", Tensor.ofFloats(new long[] {0}));
    tensors.put("m/zero", Tensor.ofFloats(new long[] {0, 3}));
    BundleWriter.write(local(), prefix, tensors);
    Map<String, byte[]> index = rawIndex(prefix);
    assertEquals("08 01 1a 02 08 01", hex(index.get("")));
    assertEquals("08 02 12 00 20 18 28 08 35 94 7c 58 b2", hex(index.get("alpha")));
    assertEquals("08 01 12 02 12 00 20 8c 01 35 d8 ea 82 a2", hex(index.get("empty")));
    assertTrue(hex(index.get("m/zero")).startsWith("08 01 12 06 12 00 12 02 08 03 20 8c 01"), hex(index.get("m/zero")));
    assertEquals(List.of("", "alpha", "empty", "filler", "m/zero", "zeta/w"), List.copyOf(index.keySet()));
    byte[] data = Files.readAllBytes(java.nio.file.Path.of(Bundle.dataFile(prefix, 0, 1).toUri()));
    assertEquals(140, data.length);
    assertEquals("00 00 c0 3f", hex(java.util.Arrays.copyOf(data, 4)));
    assertEquals("18 2d 44 54 fb 21 09 40", hex(java.util.Arrays.copyOfRange(data, 24, 32)));
  }

  @Test
  void stringsAreEncodedAsTensorFlowDoes() {
    byte[] encoded = BundleWriter.encodeStrings(List.of(new byte[0], "hello".getBytes(StandardCharsets.UTF_8),
        "ü".getBytes(StandardCharsets.UTF_8)));
    assertEquals("00 05 02 24 e3 b0 75 68 65 6c 6c 6f c3 bc", hex(encoded));
  }

  @Test
  void aStringTensorsEntryCrcIsTensorFlows() throws Exception {
    Path prefix = new Path(tmp.toUri().toString(), "ckpt-s");
    BundleWriter.write(local(), prefix, Map.of("s", Tensor.ofStrings(new long[] {2}, "a", "bc")));
    // TensorFlow's WriteStringTensor: CRC32C over the lengths as uint32, the masked length
    // checksum (bf df db 7a), then the bytes; the entry holds it masked. Computed independently.
    assertEquals(0x8536e4e9, BundleReader.open(local(), prefix).entries().get("s").getCrc32C());
    assertEquals("01 02 bf df db 7a 61 62 63",
        hex(Files.readAllBytes(java.nio.file.Path.of(Bundle.dataFile(prefix, 0, 1).toUri()))));
  }

  @Test
  void everyDtypeAndShapeRoundTripsAndKeysSortAsUnsignedBytes() throws Exception {
    Path prefix = new Path(tmp.toUri().toString(), "all");
    Map<String, Tensor> tensors = new LinkedHashMap<>();
    tensors.put("😀", Tensor.ofFloats(new long[] {2, 2}, 1, -2, Float.NaN, Float.MIN_VALUE));
    tensors.put("～", Tensor.ofDoubles(new long[] {1}, -0.0));
    tensors.put("名/x", Tensor.ofInts(new long[] {3}, Integer.MIN_VALUE, 0, Integer.MAX_VALUE));
    tensors.put("Z", Tensor.ofLongs(new long[] {2}, Long.MIN_VALUE, Long.MAX_VALUE));
    tensors.put("flags", Tensor.ofBooleans(new long[] {3}, true, false, true));
    tensors.put("words", Tensor.ofStrings(new long[] {3}, "", "hello", "ü"));
    tensors.put("step", Tensor.scalar(42));
    BundleWriter.write(local(), prefix, tensors);
    BundleReader reader = BundleReader.open(local(), prefix);
    assertEquals(List.of("Z", "flags", "step", "words", "名/x", "～", "😀"), List.copyOf(reader.entries().keySet()));
    Map<String, Tensor> back = reader.readAll();
    tensors.forEach((name, t) -> assertEquals(t, back.get(name), name));
    assertArrayEquals(new long[] {Long.MIN_VALUE, Long.MAX_VALUE}, back.get("Z").longs());
  }

  @Test
  void thousandsOfTensorsSpanSeveralIndexBlocks() throws Exception {
    Path prefix = new Path(tmp.toUri().toString(), "big");
    Map<String, Tensor> tensors = new LinkedHashMap<>();
    for (int i = 5999; i >= 0; i--) {
      tensors.put(name(i), Tensor.ofFloats(new long[] {1}, i)); // reversed digits: little shared prefix
    }
    BundleWriter.write(local(), prefix, tensors);
    assertTrue(Files.size(java.nio.file.Path.of(Bundle.indexFile(prefix).toUri())) > 2 * 262144, "three data blocks");
    BundleReader reader = BundleReader.open(local(), prefix);
    assertEquals(6000, reader.entries().size());
    assertEquals(4321f, reader.read(name(4321)).floats()[0]);
  }

  private static String name(int i) {
    return new StringBuilder(String.format("%0100d", i)).reverse().toString();
  }

  @Test
  void aWriteOnItsOwnLeavesNoIoThreadBehind() throws Exception {
    java.util.Set<Thread> before = CheckpointManagerTest.ioThreads();
    BundleWriter.write(local(), new Path(tmp.toUri().toString(), "alone"), Map.of("w", Tensor.ofFloats(new long[] {1}, 1)));
    assertEquals(before, CheckpointManagerTest.ioThreads());
  }

  @Test
  void corruptDataIsReportedWithTheKeyAndFile() throws Exception {
    Path prefix = new Path(tmp.toUri().toString(), "bad");
    BundleWriter.write(local(), prefix, Map.of("w", Tensor.ofFloats(new long[] {2}, 1, 2)));
    java.nio.file.Path data = java.nio.file.Path.of(Bundle.dataFile(prefix, 0, 1).toUri());
    byte[] bytes = Files.readAllBytes(data);
    bytes[0] ^= 1;
    Files.write(data, bytes);
    IOException e = assertThrows(IOException.class, () -> BundleReader.open(local(), prefix).read("w"));
    assertTrue(e.getMessage().startsWith("Checksum does not match for w in "), e.getMessage());
  }

  @Test
  void truncatedOrMissingIndexIsAnError() throws Exception {
    Path prefix = new Path(tmp.toUri().toString(), "cut");
    BundleWriter.write(local(), prefix, Map.of("w", Tensor.ofFloats(new long[] {1}, 1)));
    java.nio.file.Path index = java.nio.file.Path.of(Bundle.indexFile(prefix).toUri());
    byte[] bytes = Files.readAllBytes(index);
    Files.write(index, java.util.Arrays.copyOf(bytes, bytes.length - 10));
    IOException e = assertThrows(IOException.class, () -> BundleReader.open(local(), prefix));
    assertTrue(e.getMessage().contains("not an sstable (bad magic number)"), e.getMessage());
    assertThrows(java.io.FileNotFoundException.class, () -> BundleReader.open(local(), new Path(tmp.toUri().toString(), "none")));
  }

  @Test
  void tableKeyShortening() {
    assertEquals("{", new String(Table.shortSuccessor("zeta/w".getBytes()), StandardCharsets.UTF_8));
    assertEquals("m", new String(Table.shortSuccessor("layer39/kernel".getBytes()), StandardCharsets.UTF_8));
    assertEquals("f1", HexFormat.of().formatHex(Table.shortSuccessor("😀".getBytes(StandardCharsets.UTF_8))));
    assertEquals("abd", new String(Table.shortestSeparator("abcdef".getBytes(), "abzz".getBytes())));
    assertEquals("a0", new String(Table.shortestSeparator("a0".getBytes(), "a1".getBytes())));
  }

  @Test
  void emptyMetaindexBlockHasTensorFlowsConstantTrailer() throws Exception {
    byte[] file = Table.write(new TreeMap<>(Table.KEY_ORDER));
    // no data block: metaindex at 0 (8 bytes + trailer), then the index block, then the footer
    assertEquals("00 00 00 00 01 00 00 00 00 c0 f2 a1 b0", hex(java.util.Arrays.copyOf(file, 13)));
    assertEquals("57 fb 80 8b 24 75 47 db", hex(java.util.Arrays.copyOfRange(file, file.length - 8, file.length)));
  }

  @Test
  void aLargeBundleIsReadWholeAndIntoTheCallersArraysWithItsValuesAndCrcsChecked() throws Exception {
    Path prefix = new Path(tmp.toUri().toString(), "ckpt-big");
    Map<String, Tensor> tensors = new LinkedHashMap<>();
    java.util.Random random = new java.util.Random(3);
    Map<String, Object> arrays = new LinkedHashMap<>();
    for (int i = 0; i < 5; i++) { // 5 x 8 MiB, each copied through the 1 MiB chunk 8 times
      float[] values = new float[2 << 20];
      for (int j = 0; j < values.length; j += 1001) {
        values[j] = random.nextFloat();
      }
      tensors.put("layer" + i, Tensor.ofFloats(new long[] {values.length}, values));
      arrays.put("layer" + i, new float[values.length]);
    }
    tensors.put("step", Tensor.scalar(42L));
    tensors.put("ids", Tensor.ofInts(new long[] {3}, 7, -8, 9));
    tensors.put("scale", Tensor.ofDoubles(new long[] {2}, 0.5, -1e300));
    arrays.put("step", new long[1]);
    arrays.put("ids", new int[3]);
    arrays.put("scale", new double[2]);
    BundleWriter.write(local(), prefix, tensors);

    Map<String, Tensor> all = BundleReader.open(local(), prefix).readAll();
    assertEquals(tensors.keySet(), all.keySet());
    tensors.forEach((name, t) -> assertArrayEquals(t.data(), all.get(name).data(), name));

    BundleReader.open(local(), prefix).readInto(arrays);
    for (int i = 0; i < 5; i++) {
      assertArrayEquals(tensors.get("layer" + i).floats(), (float[]) arrays.get("layer" + i), "layer" + i);
    }
    assertArrayEquals(new long[] {42}, (long[]) arrays.get("step"));
    assertArrayEquals(new int[] {7, -8, 9}, (int[]) arrays.get("ids"));
    assertArrayEquals(new double[] {0.5, -1e300}, (double[]) arrays.get("scale"));

    IOException size = assertThrows(IOException.class,
        () -> BundleReader.open(local(), prefix).readInto(Map.of("ids", new int[4])));
    assertTrue(size.getMessage().endsWith("ids is int32 of 12 bytes, but the array to restore it into holds 4 int32 "
        + "values"), size.getMessage());
    IOException dtype = assertThrows(IOException.class,
        () -> BundleReader.open(local(), prefix).readInto(Map.of("ids", new float[3])));
    assertTrue(dtype.getMessage().contains("ids is int32 of 12 bytes"), dtype.getMessage());
    IOException missing = assertThrows(IOException.class,
        () -> BundleReader.open(local(), prefix).readInto(Map.of("nope", new float[1])));
    assertTrue(missing.getMessage().startsWith("Key nope not found in checkpoint"), missing.getMessage());

    // flip one byte in the middle of layer3: both reads name the tensor
    java.nio.file.Path data = java.nio.file.Path.of(Bundle.dataFile(prefix, 0, 1).toUri());
    long offset = BundleReader.open(local(), prefix).entries().get("layer3").getOffset() + 12345;
    try (var file = new java.io.RandomAccessFile(data.toFile(), "rw")) {
      file.seek(offset);
      int b = file.read();
      file.seek(offset);
      file.write(b ^ 0x40);
    }
    IOException corrupt = assertThrows(IOException.class, () -> BundleReader.open(local(), prefix).readInto(arrays));
    assertTrue(corrupt.getMessage().startsWith("Checksum does not match for layer3"), corrupt.getMessage());
    IOException corruptAll = assertThrows(IOException.class, () -> BundleReader.open(local(), prefix).readAll());
    assertTrue(corruptAll.getMessage().startsWith("Checksum does not match for layer3"), corruptAll.getMessage());
  }
}
