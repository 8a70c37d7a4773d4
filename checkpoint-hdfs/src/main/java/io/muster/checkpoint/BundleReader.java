package io.muster.checkpoint;

import com.google.protobuf.InvalidProtocolBufferException;
import io.muster.internal.Crc32c;
import io.muster.proto.tf.BundleEntryProto;
import io.muster.proto.tf.BundleHeaderProto;
import io.muster.proto.tf.DataType;
import io.muster.proto.tf.TensorShapeProto;
import java.io.IOException;
import java.io.InputStream;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import org.apache.hadoop.fs.FSDataInputStream;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * An opened {@link Bundle} checkpoint, read as TensorFlow's {@code RestoreV2} reads it, with every
 * CRC checked: its entries in key order; tensors are read on demand.
 *
 * <p>One file because every way of reading (one tensor, all, into arrays, verify) goes through the
 * same open shards, the same file-order walk and the same CRC checks, and a damaged tensor must be
 * reported the same way by each; the index's format ({@link Table}) is apart.
 */
public final class BundleReader {
  private static final Logger log = LoggerFactory.getLogger(BundleReader.class);

  /** Chunk size for checking a CRC while the bytes just read are still in the cache. */
  private static final int CHUNK = 1 << 20;

  private final FileSystem fs;
  private FileSystem client; // made on the first data read: listing the entries needs none
  private final Path prefix;
  private final int shards;
  private final LinkedHashMap<String, BundleEntryProto> entries = new LinkedHashMap<>();

  private BundleReader(FileSystem fs, Path prefix, int shards) {
    this.fs = fs;
    this.prefix = prefix;
    this.shards = shards;
  }

  /**
   * Opens a checkpoint by its prefix ({@code dir/ckpt-3}).
   *
   * @throws IOException naming the file when the index is missing, truncated or corrupt
   */
  public static BundleReader open(FileSystem fs, Path prefix) throws IOException {
    Path index = Bundle.indexFile(prefix);
    byte[] bytes;
    try (InputStream in = fs.open(index)) {
      bytes = in.readAllBytes();
    }
    TreeMap<byte[], byte[]> table = Table.read(bytes, index.toString());
    if (table.isEmpty()) {
      throw new IOException(index + " holds no entries, not even the bundle header");
    }
    BundleHeaderProto header;
    try {
      header = BundleHeaderProto.parseFrom(table.firstEntry().getValue());
    } catch (InvalidProtocolBufferException e) {
      throw new IOException(index + ": the bundle header does not parse: " + e.getMessage(), e);
    }
    if (header.getEndianness() != BundleHeaderProto.Endianness.LITTLE) {
      throw new IOException(index + ": big-endian checkpoints are not supported");
    }
    if (header.getVersion().getMinConsumer() > 1 || header.getVersion().getBadConsumersList().contains(1)) {
      throw new IOException(index + ": checkpoint min consumer version " + header.getVersion().getMinConsumer()
          + " above current version 1");
    }
    BundleReader reader = new BundleReader(fs, prefix, Math.max(1, header.getNumShards()));
    for (Map.Entry<byte[], byte[]> e : table.entrySet()) {
      if (e.getKey().length == 0) {
        continue;
      }
      try {
        reader.entries.put(new String(e.getKey(), StandardCharsets.UTF_8), BundleEntryProto.parseFrom(e.getValue()));
      } catch (InvalidProtocolBufferException ex) {
        throw new IOException(index + ": entry " + new String(e.getKey(), StandardCharsets.UTF_8)
            + " does not parse: " + ex.getMessage(), ex);
      }
    }
    return reader;
  }

  /** Tensor name to entry (dtype, shape, where its bytes are), in key order. */
  public Map<String, BundleEntryProto> entries() {
    return entries;
  }

  /**
   * Checks that this checkpoint holds exactly the caller's variables: the same names, and each
   * with the same dtype and shape as the caller's tensor of that name (its values are not read).
   *
   * @throws CheckpointMismatchException naming the checkpoint and every difference
   */
  public void requireVariables(Map<String, Tensor> like) throws CheckpointMismatchException {
    List<String> differences = new ArrayList<>();
    for (Map.Entry<String, Tensor> e : new TreeMap<>(like).entrySet()) {
      BundleEntryProto entry = entries.get(e.getKey());
      if (entry == null) {
        differences.add(e.getKey() + " is missing there");
        continue;
      }
      long[] shape = entry.getShape().getDimList().stream().mapToLong(TensorShapeProto.Dim::getSize).toArray();
      Tensor want = e.getValue();
      if (entry.getDtype() != want.dtype() || !java.util.Arrays.equals(shape, want.shape())) {
        differences.add(e.getKey() + " is " + Tensor.dtypeName(entry.getDtype()) + java.util.Arrays.toString(shape)
            + " there but " + want + " here");
      }
    }
    List<String> extra = entries.keySet().stream().filter(name -> !like.containsKey(name)).sorted().toList();
    if (!extra.isEmpty()) {
      differences.add("it also holds " + String.join(", ", extra));
    }
    if (!differences.isEmpty()) {
      throw new CheckpointMismatchException(prefix + " holds another model: " + String.join("; ", differences));
    }
  }

  private Tensor read(String name, Map<Integer, FSDataInputStream> streams) throws IOException {
    BundleEntryProto entry = entries.get(name);
    if (entry == null) {
      throw new IOException("Key " + name + " not found in checkpoint " + prefix);
    }
    if (entry.getSlicesCount() > 0) {
      throw new IOException(prefix + ": " + name + " is a partitioned (sliced) tensor, which Muster does not read yet");
    }
    long[] shape = entry.getShape().getDimList().stream().mapToLong(TensorShapeProto.Dim::getSize).toArray();
    long n = Tensor.numElements(shape);
    if (entry.getShardId() >= shards) {
      throw new IOException(prefix + ": " + name + " is in shard " + entry.getShardId() + " of " + shards);
    }
    if (entry.getDtype() != DataType.DT_STRING && entry.getSize() != n * Tensor.elementSize(entry.getDtype())) {
      throw new IOException("Invalid size in bundle entry: key " + name + "; stored size " + entry.getSize()
          + "; expected size " + n * Tensor.elementSize(entry.getDtype()) + " (" + prefix + ")");
    }
    Tensor[] read = new Tensor[1];
    readTensor(name, entry, streams, in -> {
      byte[] bytes = new byte[Math.toIntExact(entry.getSize())];
      int crc = readWithCrc(in, bytes);
      if (entry.getDtype() == DataType.DT_STRING) {
        read[0] = decodeStrings(name, shape, n, bytes, entry.getCrc32C());
      } else {
        checkCrc(name, entry, crc, "");
        read[0] = new Tensor(entry.getDtype(), shape, bytes, null);
      }
    });
    return read[0];
  }

  private static int readWithCrc(FSDataInputStream in, byte[] bytes) throws IOException {
    java.util.zip.CRC32C crc = new java.util.zip.CRC32C();
    for (int off = 0; off < bytes.length; off += CHUNK) {
      int len = Math.min(CHUNK, bytes.length - off);
      in.readFully(bytes, off, len);
      crc.update(bytes, off, len);
    }
    return (int) crc.getValue();
  }

  private void checkCrc(String name, BundleEntryProto entry, int crc, String consequence) throws IOException {
    if (crc != Crc32c.unmask(entry.getCrc32C())) {
      Path file = Bundle.dataFile(prefix, entry.getShardId(), shards);
      throw new IOException("Checksum does not match for " + name + " in " + file + ": stored "
          + Integer.toUnsignedString(Crc32c.unmask(entry.getCrc32C())) + " vs. calculated "
          + Integer.toUnsignedString(crc) + consequence);
    }
  }

  /** Reads one tensor's bytes from a stream positioned at them, checking them against the entry's CRC. */
  private interface TensorCopy {
    void from(FSDataInputStream in) throws IOException;
  }

  /**
   * Reads one tensor with {@code copy} from this thread's stream on its data file, opened through
   * {@link CheckpointClient}, which skips HDFS's per-chunk checksums since the tensor's own
   * CRC32C covers the same bytes. When that read fails (its CRC does not match, the replica ends
   * early), the tensor is read once more through the caller's client, which verifies HDFS's
   * checksums and so moves to a good replica when one is corrupt; when that fails too, the error
   * names the tensor and both causes.
   */
  private void readTensor(String name, BundleEntryProto entry, Map<Integer, FSDataInputStream> streams,
      TensorCopy copy) throws IOException {
    Path file = Bundle.dataFile(prefix, entry.getShardId(), shards);
    TensorCopy whole = in -> {
      try {
        copy.from(in);
      } catch (java.io.EOFException e) {
        throw new IOException(file + " ends before the " + entry.getSize() + " bytes of " + name + " at offset "
            + entry.getOffset() + ": the checkpoint is incomplete or corrupt", e);
      }
    };
    try {
      whole.from(stream(entry, streams));
    } catch (java.io.InterruptedIOException e) {
      throw e;
    } catch (IOException fast) {
      if (client() == fs) {
        throw fast;
      }
      log.warn("reading {} without HDFS's checksums failed ({}); reading it again with them", name,
          fast.getMessage());
      try (FSDataInputStream in = fs.open(file)) {
        in.seek(entry.getOffset());
        whole.from(in);
      } catch (java.io.InterruptedIOException e) {
        throw e;
      } catch (IOException verified) {
        throw new IOException(fast.getMessage() + "; read again with HDFS's checksums: " + verified.getMessage(),
            verified);
      }
    }
  }

  /** Every tensor, in key order; the data files are read front to back. */
  public Map<String, Tensor> readAll() throws IOException {
    Map<String, Tensor> byName = new java.util.HashMap<>();
    inFileOrder(new ArrayList<>(entries.keySet()), (name, streams) -> byName.put(name, read(name, streams)));
    Map<String, Tensor> all = new LinkedHashMap<>();
    entries.keySet().forEach(name -> all.put(name, byName.get(name)));
    return all;
  }

  /** A tensor that could not be read back intact, and why (a CRC mismatch, a data file that ends early). */
  public record Damage(String tensor, String problem) {}

  /** What {@link #verify()} read: how many tensors and data bytes, and each tensor that failed. */
  public record Verification(int tensors, long bytes, List<Damage> damaged) {
    public Verification {
      damaged = List.copyOf(damaged);
    }

    public boolean intact() {
      return damaged.isEmpty();
    }
  }

  /**
   * Reads every tensor's bytes, in file order, and checks each against its CRC32C, as a restore
   * would, without keeping them (numeric tensors pass through a 1 MiB buffer). A tensor that fails
   * does not stop the others from being checked.
   */
  public Verification verify() throws IOException {
    List<Damage> damaged = new ArrayList<>();
    long[] bytes = new long[1];
    byte[] chunk = new byte[CHUNK];
    inFileOrder(new ArrayList<>(entries.keySet()), (name, streams) -> {
      BundleEntryProto entry = entries.get(name);
      bytes[0] += entry.getSize();
      try {
        if (entry.getDtype() == DataType.DT_STRING || entry.getSlicesCount() > 0) {
          read(name, streams);
        } else {
          readTensor(name, entry, streams, in -> {
            java.util.zip.CRC32C crc = new java.util.zip.CRC32C();
            for (long left = entry.getSize(); left > 0; ) {
              int len = (int) Math.min(chunk.length, left);
              in.readFully(chunk, 0, len);
              crc.update(chunk, 0, len);
              left -= len;
            }
            checkCrc(name, entry, (int) crc.getValue(), "");
          });
        }
      } catch (java.io.InterruptedIOException e) {
        throw e;
      } catch (IOException e) {
        damaged.add(new Damage(name, e.getMessage()));
      }
    });
    damaged.sort(java.util.Comparator.comparing(Damage::tensor));
    return new Verification(entries.size(), bytes[0], damaged);
  }

  /**
   * Reads each named tensor into the caller's array ({@code float[]}, {@code double[]},
   * {@code int[]} or {@code long[]}, matching the tensor's dtype and element count), as
   * TensorFlow restores into existing variables: no new memory per restore, the CRC checked on
   * the way.
   *
   * @throws IOException naming the tensor when it is missing, of another dtype or size, or corrupt
   */
  public void readInto(Map<String, ?> arrays) throws IOException {
    for (Map.Entry<String, ?> e : arrays.entrySet()) {
      BundleEntryProto entry = entries.get(e.getKey());
      if (entry == null) {
        throw new IOException("Key " + e.getKey() + " not found in checkpoint " + prefix);
      }
      Object array = e.getValue();
      DataType wanted = array instanceof float[] ? DataType.DT_FLOAT : array instanceof double[] ? DataType.DT_DOUBLE
          : array instanceof int[] ? DataType.DT_INT32 : array instanceof long[] ? DataType.DT_INT64 : null;
      if (wanted == null) {
        throw new IllegalArgumentException(e.getKey() + ": cannot restore into a " + array.getClass().getSimpleName()
            + "; give a float[], double[], int[] or long[]");
      }
      long elements = java.lang.reflect.Array.getLength(e.getValue());
      if (entry.getDtype() != wanted || entry.getSize() != elements * Tensor.elementSize(wanted)) {
        throw new IOException(prefix + ": " + e.getKey() + " is " + Tensor.dtypeName(entry.getDtype()) + " of "
            + entry.getSize() + " bytes, but the array to restore it into holds " + elements + " "
            + Tensor.dtypeName(wanted) + " values");
      }
    }
    inFileOrder(new ArrayList<>(arrays.keySet()), new ChunkedCopy(arrays));
  }

  private FileSystem client() throws IOException {
    if (client == null) {
      client = CheckpointClient.of(fs);
    }
    return client;
  }

  /** This thread's stream on the entry's data file, at the entry's offset. */
  private FSDataInputStream stream(BundleEntryProto entry, Map<Integer, FSDataInputStream> streams)
      throws IOException {
    FSDataInputStream in = streams.get(entry.getShardId());
    if (in == null) {
      in = client().open(Bundle.dataFile(prefix, entry.getShardId(), shards));
      streams.put(entry.getShardId(), in);
    }
    if (in.getPos() != entry.getOffset()) {
      in.seek(entry.getOffset());
    }
    return in;
  }

  /** What is done with each tensor, given the streams of the thread doing it. */
  private interface PerTensor {
    void read(String name, Map<Integer, FSDataInputStream> streams) throws IOException;
  }

  /**
   * Reads the tensors in file order, with one stream per data file: sequential reads are several
   * times faster than positioned ones on HDFS.
   */
  private void inFileOrder(List<String> names, PerTensor each) throws IOException {
    names.sort(java.util.Comparator.comparingInt((String n) -> entries.get(n).getShardId())
        .thenComparingLong(n -> entries.get(n).getOffset()));
    Map<Integer, FSDataInputStream> streams = new java.util.HashMap<>();
    try {
      for (String name : names) {
        each.read(name, streams);
      }
    } finally {
      for (FSDataInputStream in : streams.values()) {
        in.close();
      }
    }
  }

  /** Streams a tensor through a small buffer into its array, checking the CRC on the way. */
  private final class ChunkedCopy implements PerTensor {
    private final Map<String, ?> arrays;
    private final byte[] chunk = new byte[CHUNK];

    ChunkedCopy(Map<String, ?> arrays) {
      this.arrays = arrays;
    }

    @Override
    public void read(String name, Map<Integer, FSDataInputStream> streams) throws IOException {
      BundleEntryProto entry = entries.get(name);
      readTensor(name, entry, streams, in -> copy(name, entry, in));
    }

    private void copy(String name, BundleEntryProto entry, FSDataInputStream in) throws IOException {
      Object array = arrays.get(name);
      ByteBuffer bytes = ByteBuffer.wrap(chunk).order(ByteOrder.LITTLE_ENDIAN);
      java.util.zip.CRC32C crc = new java.util.zip.CRC32C();
      int element = Tensor.elementSize(entry.getDtype());
      int at = 0;
      for (long left = entry.getSize(); left > 0; ) {
        int len = (int) Math.min(chunk.length, left);
        in.readFully(chunk, 0, len);
        crc.update(chunk, 0, len);
        bytes.clear().limit(len);
        int n = len / element;
        if (array instanceof float[] a) {
          bytes.asFloatBuffer().get(a, at, n);
        } else if (array instanceof double[] a) {
          bytes.asDoubleBuffer().get(a, at, n);
        } else if (array instanceof int[] a) {
          bytes.asIntBuffer().get(a, at, n);
        } else {
          bytes.asLongBuffer().get((long[]) array, at, n);
        }
        at += n;
        left -= len;
      }
      checkCrc(name, entry, (int) crc.getValue(), "; the restored array holds partial values");
    }
  }

  public Tensor read(String name) throws IOException {
    Map<Integer, FSDataInputStream> streams = new java.util.HashMap<>();
    try {
      return read(name, streams);
    } finally {
      for (FSDataInputStream in : streams.values()) {
        in.close();
      }
    }
  }

  private Tensor decodeStrings(String name, long[] shape, long n, byte[] bytes, int storedCrc) throws IOException {
    ByteBuffer in = ByteBuffer.wrap(bytes).order(ByteOrder.LITTLE_ENDIAN);
    long[] lengths = new long[(int) n];
    ByteBuffer lengthCrcInput = ByteBuffer.allocate(8 * (int) n).order(ByteOrder.LITTLE_ENDIAN);
    for (int i = 0; i < n; i++) {
      lengths[i] = Table.getVarint(in);
      if (lengths[i] > 0xFFFFFFFFL) {
        lengthCrcInput.putLong(lengths[i]);
      } else {
        lengthCrcInput.putInt((int) lengths[i]);
      }
    }
    int lengthCrc = in.getInt();
    if (Crc32c.mask(Crc32c.of(lengthCrcInput.array(), 0, lengthCrcInput.position())) != lengthCrc) {
      throw new IOException("The length checksum does not match for " + name + " in " + prefix);
    }
    List<byte[]> strings = new ArrayList<>();
    for (long length : lengths) {
      byte[] s = new byte[Math.toIntExact(length)];
      in.get(s);
      strings.add(s);
    }
    if (Bundle.stringsCrc(bytes, (int) n) != Crc32c.unmask(storedCrc)) {
      throw new IOException("Checksum does not match for " + name + " in " + prefix);
    }
    return new Tensor(DataType.DT_STRING, shape, null, strings);
  }
}
