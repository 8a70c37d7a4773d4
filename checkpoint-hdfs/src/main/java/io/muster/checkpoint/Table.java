package io.muster.checkpoint;

import io.muster.internal.Crc32c;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.Arrays;
import java.util.Comparator;
import java.util.Map;
import java.util.TreeMap;

/**
 * The sorted string table of a checkpoint's {@code .index} file: LevelDB's layout without filters,
 * as TensorFlow's {@code TableBuilder} writes it (256 KiB blocks, restart interval 16 for data and
 * 1 for the index, an empty metaindex, shortened index keys, a 48-byte footer), so the bytes equal
 * TensorFlow's for the same entries. Keys order as unsigned bytes.
 */
final class Table {

  static final Comparator<byte[]> KEY_ORDER = Arrays::compareUnsigned;
  private static final int BLOCK_SIZE = 262144;
  private static final long MAGIC = 0xdb4775248b80fb57L;
  private static final int FOOTER = 48;

  private Table() {}

  /** Encodes the entries (sorted by unsigned bytes) as a table file. */
  static byte[] write(TreeMap<byte[], byte[]> entries) {
    ByteArrayOutputStream file = new ByteArrayOutputStream();
    BlockBuilder data = new BlockBuilder(16);
    BlockBuilder index = new BlockBuilder(1);
    byte[] lastKey = null;
    long[] pendingHandle = null;
    for (Map.Entry<byte[], byte[]> e : entries.entrySet()) {
      byte[] key = e.getKey();
      byte[] value = e.getValue();
      if (!data.isEmpty() && key.length + value.length >= 2 * BLOCK_SIZE) {
        pendingHandle = flush(file, data);
      }
      if (pendingHandle != null) {
        index.add(shortestSeparator(lastKey, key), handle(pendingHandle));
        pendingHandle = null;
      }
      data.add(key, value);
      lastKey = key;
      if (data.estimatedSize() >= BLOCK_SIZE) {
        pendingHandle = flush(file, data);
      }
    }
    if (!data.isEmpty()) {
      pendingHandle = flush(file, data);
    }
    long[] metaindex = writeBlock(file, new BlockBuilder(16).finish());
    if (pendingHandle != null) {
      index.add(shortSuccessor(lastKey), handle(pendingHandle));
    }
    long[] indexHandle = writeBlock(file, index.finish());
    ByteBuffer footer = ByteBuffer.allocate(FOOTER).order(ByteOrder.LITTLE_ENDIAN);
    putVarint(footer, metaindex[0]);
    putVarint(footer, metaindex[1]);
    putVarint(footer, indexHandle[0]);
    putVarint(footer, indexHandle[1]);
    footer.putLong(40, MAGIC);
    file.writeBytes(footer.array());
    return file.toByteArray();
  }

  private static long[] flush(ByteArrayOutputStream file, BlockBuilder block) {
    long[] h = writeBlock(file, block.finish());
    block.reset();
    return h;
  }

  private static long[] writeBlock(ByteArrayOutputStream file, byte[] contents) {
    long offset = file.size();
    file.writeBytes(contents);
    byte[] withType = Arrays.copyOf(contents, contents.length + 1);
    ByteBuffer trailer = ByteBuffer.allocate(5).order(ByteOrder.LITTLE_ENDIAN);
    trailer.put((byte) 0).putInt(Crc32c.mask(Crc32c.of(withType)));
    file.writeBytes(trailer.array());
    return new long[] {offset, contents.length};
  }

  private static byte[] handle(long[] h) {
    ByteBuffer b = ByteBuffer.allocate(20);
    putVarint(b, h[0]);
    putVarint(b, h[1]);
    return Arrays.copyOf(b.array(), b.position());
  }

  static byte[] shortestSeparator(byte[] start, byte[] limit) {
    int min = Math.min(start.length, limit.length);
    int i = 0;
    while (i < min && start[i] == limit[i]) {
      i++;
    }
    if (i < min) {
      int s = start[i] & 0xff;
      if (s != 0xff && s + 1 < (limit[i] & 0xff)) {
        byte[] out = Arrays.copyOf(start, i + 1);
        out[i]++;
        return out;
      }
    }
    return start;
  }

  static byte[] shortSuccessor(byte[] key) {
    for (int i = 0; i < key.length; i++) {
      if ((key[i] & 0xff) != 0xff) {
        byte[] out = Arrays.copyOf(key, i + 1);
        out[i]++;
        return out;
      }
    }
    return key;
  }

  /** Decodes every entry of a table file; checks the magic and every block's CRC. */
  static TreeMap<byte[], byte[]> read(byte[] file, String source) throws IOException {
    if (file.length < FOOTER) {
      throw new IOException(source + ": file is too short to be an sstable (" + file.length + " bytes)");
    }
    ByteBuffer footer = ByteBuffer.wrap(file, file.length - FOOTER, FOOTER).slice().order(ByteOrder.LITTLE_ENDIAN);
    if (footer.getLong(40) != MAGIC) {
      throw new IOException(source + ": not an sstable (bad magic number)");
    }
    getVarint(footer);
    getVarint(footer);
    long indexOffset = getVarint(footer);
    long indexSize = getVarint(footer);
    TreeMap<byte[], byte[]> entries = new TreeMap<>(KEY_ORDER);
    for (byte[] handleBytes : readBlock(file, indexOffset, indexSize, source).values()) {
      ByteBuffer h = ByteBuffer.wrap(handleBytes);
      entries.putAll(readBlock(file, getVarint(h), getVarint(h), source));
    }
    return entries;
  }

  private static TreeMap<byte[], byte[]> readBlock(byte[] file, long offset, long size, String source) throws IOException {
    if (offset < 0 || size < 8 || offset + size + 5 > file.length) {
      throw new IOException(source + ": block (" + offset + ", " + size + ") lies outside the " + file.length + "-byte file");
    }
    int off = (int) offset;
    int len = (int) size;
    if (file[off + len] != 0) {
      throw new IOException(source + ": compressed block (type " + file[off + len] + ") is not supported");
    }
    int stored = ByteBuffer.wrap(file, off + len + 1, 4).order(ByteOrder.LITTLE_ENDIAN).getInt();
    if (Crc32c.mask(Crc32c.of(file, off, len + 1)) != stored) {
      throw new IOException(source + ": block checksum mismatch at offset " + offset);
    }
    ByteBuffer block = ByteBuffer.wrap(file, off, len).slice().order(ByteOrder.LITTLE_ENDIAN);
    int restarts = block.getInt(len - 4);
    int end = len - 4 - 4 * restarts;
    TreeMap<byte[], byte[]> entries = new TreeMap<>(KEY_ORDER);
    byte[] key = new byte[0];
    block.position(0);
    while (block.position() < end) {
      int shared = (int) getVarint(block);
      int nonShared = (int) getVarint(block);
      int valueLength = (int) getVarint(block);
      if (shared > key.length) {
        throw new IOException(source + ": bad entry in block at offset " + offset);
      }
      byte[] next = Arrays.copyOf(key, shared + nonShared);
      block.get(next, shared, nonShared);
      byte[] value = new byte[valueLength];
      block.get(value);
      entries.put(next, value);
      key = next;
    }
    return entries;
  }

  static void putVarint(ByteBuffer b, long v) {
    while ((v & ~0x7fL) != 0) {
      b.put((byte) ((v & 0x7f) | 0x80));
      v >>>= 7;
    }
    b.put((byte) v);
  }

  static long getVarint(ByteBuffer b) throws IOException {
    long result = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (!b.hasRemaining()) {
        throw new IOException("truncated varint");
      }
      byte x = b.get();
      result |= (long) (x & 0x7f) << shift;
      if (x >= 0) {
        return result;
      }
    }
    throw new IOException("malformed varint");
  }

  /** One block: prefix-compressed entries, restart offsets, their count. */
  private static final class BlockBuilder {
    private final int restartInterval;
    private ByteArrayOutputStream buffer = new ByteArrayOutputStream();
    private final java.util.List<Integer> restarts = new java.util.ArrayList<>(java.util.List.of(0));
    private int counter;
    private byte[] lastKey = new byte[0];
    private int entries;

    BlockBuilder(int restartInterval) {
      this.restartInterval = restartInterval;
    }

    void add(byte[] key, byte[] value) {
      int shared = 0;
      if (counter < restartInterval) {
        int min = Math.min(lastKey.length, key.length);
        while (shared < min && lastKey[shared] == key[shared]) {
          shared++;
        }
      } else {
        restarts.add(buffer.size());
        counter = 0;
      }
      ByteBuffer head = ByteBuffer.allocate(15);
      putVarint(head, shared);
      putVarint(head, key.length - shared);
      putVarint(head, value.length);
      buffer.write(head.array(), 0, head.position());
      buffer.write(key, shared, key.length - shared);
      buffer.writeBytes(value);
      lastKey = key;
      counter++;
      entries++;
    }

    boolean isEmpty() {
      return entries == 0;
    }

    int estimatedSize() {
      return buffer.size() + 4 * restarts.size() + 4;
    }

    byte[] finish() {
      ByteBuffer tail = ByteBuffer.allocate(4 * restarts.size() + 4).order(ByteOrder.LITTLE_ENDIAN);
      restarts.forEach(tail::putInt);
      tail.putInt(restarts.size());
      buffer.writeBytes(tail.array());
      return buffer.toByteArray();
    }

    void reset() {
      buffer = new ByteArrayOutputStream();
      restarts.clear();
      restarts.add(0);
      counter = 0;
      lastKey = new byte[0];
      entries = 0;
    }
  }
}
