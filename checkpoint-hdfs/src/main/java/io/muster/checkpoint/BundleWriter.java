package io.muster.checkpoint;

import io.muster.internal.Crc32c;
import io.muster.proto.tf.BundleEntryProto;
import io.muster.proto.tf.DataType;
import io.muster.proto.tf.TensorShapeProto;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.OutputStream;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.Future;
import java.util.concurrent.ThreadLocalRandom;
import java.util.function.Consumer;
import org.apache.hadoop.fs.FSDataOutputStream;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;

/**
 * Writes a {@link Bundle} checkpoint byte for byte as TensorFlow's {@code SaveV2} writes it. Each
 * file is written under a temporary name and renamed when complete (closed), data first, index
 * last, so an existing {@code .index} means a complete checkpoint. Like TensorFlow, it does not
 * fsync: a closed file survives the writer's death, and HDFS's own {@code dfs.datanode.synconclose}
 * decides whether it survives a datanode power loss.
 */
public final class BundleWriter {
  private BundleWriter() {}

  /** Writes a checkpoint; tensor names are its keys (non-empty, any characters). */
  public static void write(FileSystem fs, Path prefix, Map<String, Tensor> tensors) throws IOException {
    try (IoThreads io = new IoThreads("the write of " + prefix)) {
      write(fs, prefix, tensors, io, new AtomicFiles());
    }
  }

  /** Writes a checkpoint with its owner's threads and renames. */
  static void write(FileSystem fs, Path prefix, Map<String, Tensor> tensors, IoThreads io, AtomicFiles files)
      throws IOException {
    prepare(fs, prefix, tensors, io, files).commit(step -> {});
  }

  /**
   * A checkpoint written completely under temporary names; {@link #commit} makes it visible with
   * renames only (data, then index), so nothing but metadata changes once the bytes are written.
   */
  static final class Pending {
    private final FileSystem fs;
    private final AtomicFiles files;
    private final Path data;
    private final Path dataTemp;
    private final Path index;
    private final Path indexTemp;

    private Pending(FileSystem fs, AtomicFiles files, Path data, Path dataTemp, Path index, Path indexTemp) {
      this.fs = fs;
      this.files = files;
      this.data = data;
      this.dataTemp = dataTemp;
      this.index = index;
      this.indexTemp = indexTemp;
    }

    void commit(Consumer<SaveStep> progress) throws IOException {
      files.replace(fs, dataTemp, data);
      progress.accept(SaveStep.DATA_WRITTEN);
      files.replace(fs, indexTemp, index);
      progress.accept(SaveStep.INDEX_WRITTEN);
    }

    void abort() throws IOException {
      fs.delete(dataTemp, false);
      fs.delete(indexTemp, false);
    }
  }

  /** Writes the index and the data under temporary names, at once ({@link IoThreads} says why). */
  static Pending prepare(FileSystem fs, Path prefix, Map<String, Tensor> tensors, IoThreads io, AtomicFiles files)
      throws IOException {
    TreeMap<byte[], byte[]> index = new TreeMap<>(Table.KEY_ORDER);
    index.put(new byte[0], Bundle.HEADER);
    List<byte[]> payloads = new ArrayList<>();
    long offset = 0;
    for (Map.Entry<String, Tensor> e : tensors.entrySet()) {
      if (e.getKey().isEmpty()) {
        throw new IllegalArgumentException("tensor names must be non-empty: the empty key holds the bundle header");
      }
      Tensor t = e.getValue();
      boolean string = t.dtype() == DataType.DT_STRING;
      byte[] bytes = string ? encodeStrings(t.strings()) : t.data();
      int crc = string ? Bundle.stringsCrc(bytes, t.strings().size()) : Crc32c.of(bytes);
      TensorShapeProto.Builder shape = TensorShapeProto.newBuilder();
      for (long d : t.shape()) {
        shape.addDim(TensorShapeProto.Dim.newBuilder().setSize(d));
      }
      BundleEntryProto entry = BundleEntryProto.newBuilder().setDtype(t.dtype()).setShape(shape)
          .setOffset(offset).setSize(bytes.length).setCrc32C(Crc32c.mask(crc)).build();
      if (index.put(e.getKey().getBytes(StandardCharsets.UTF_8), entry.toByteArray()) != null) {
        throw new IllegalArgumentException("tensor name '" + e.getKey() + "' appears twice");
      }
      payloads.add(bytes);
      offset += bytes.length;
    }
    FileSystem client = CheckpointClient.of(fs);
    Path data = Bundle.dataFile(prefix, 0, 1);
    Path indexFile = Bundle.indexFile(prefix);
    Pending pending = new Pending(fs, files, data, temporary(data), indexFile, temporary(indexFile));
    byte[] table = Table.write(index);
    Future<Void> indexWrite = io.start(() -> {
      writeFile(client, pending.indexTemp, out -> out.write(table));
      return null;
    });
    try {
      writeFile(client, pending.dataTemp, out -> {
        for (byte[] payload : payloads) {
          out.write(payload);
        }
      });
      IoThreads.await(indexWrite);
      return pending;
    } catch (IOException | RuntimeException e) {
      IoThreads.awaitQuietly(indexWrite);
      pending.abort();
      throw e;
    }
  }

  /** What is written to a file that {@link #writeFile} opened. */
  interface Contents {
    void writeTo(OutputStream out) throws IOException;
  }

  /**
   * Creates (or overwrites) {@code file}, writes it and closes it. Unlike try-with-resources, a
   * close that throws the write's own exception again, as HDFS's output stream does after the
   * namenode refused a block (a space quota), cannot replace it with "Self-suppression not
   * permitted": the caller sees the write's failure.
   */
  static void writeFile(FileSystem client, Path file, Contents contents) throws IOException {
    FSDataOutputStream out = client.create(file, true);
    try {
      contents.writeTo(out);
    } catch (IOException | RuntimeException e) {
      try {
        out.close();
      } catch (IOException | RuntimeException onClose) {
        if (onClose != e) {
          e.addSuppressed(onClose);
        }
      }
      throw e;
    }
    out.close();
  }

  private static Path temporary(Path file) {
    return new Path(file.getParent(), file.getName() + ".tempstate" + Long.toUnsignedString(ThreadLocalRandom.current().nextLong()));
  }

  /** varint lengths, masked CRC of the lengths (as 4-byte ints), then the bytes. */
  static byte[] encodeStrings(List<byte[]> strings) {
    ByteBuffer lengths = ByteBuffer.allocate(10 * strings.size());
    ByteBuffer lengthCrcInput = ByteBuffer.allocate(8 * strings.size()).order(ByteOrder.LITTLE_ENDIAN);
    for (byte[] s : strings) {
      Table.putVarint(lengths, s.length);
      lengthCrcInput.putInt(s.length);
    }
    ByteArrayOutputStream out = new ByteArrayOutputStream();
    out.write(lengths.array(), 0, lengths.position());
    ByteBuffer crc = ByteBuffer.allocate(4).order(ByteOrder.LITTLE_ENDIAN)
        .putInt(Crc32c.mask(Crc32c.of(lengthCrcInput.array(), 0, lengthCrcInput.position())));
    out.writeBytes(crc.array());
    strings.forEach(out::writeBytes);
    return out.toByteArray();
  }
}
