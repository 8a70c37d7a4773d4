package io.muster.checkpoint;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.HexFormat;
import java.util.TreeMap;
import org.junit.jupiter.api.Test;

/** The sstable of a checkpoint's index: LevelDB's key shortening, varints, and what a reader refuses. */
class TableTest {

  private static byte[] bytes(String hex) {
    return HexFormat.of().parseHex(hex);
  }

  private static String hex(byte[] b) {
    return HexFormat.of().formatHex(b);
  }

  @Test
  void shortestSeparatorFollowsLevelDb() {
    assertEquals("616264", hex(Table.shortestSeparator(bytes("616263"), bytes("616265")))); // abc, abe -> abd
    assertEquals("616263", hex(Table.shortestSeparator(bytes("616263"), bytes("616264")))); // no room between
    assertEquals("6162", hex(Table.shortestSeparator(bytes("6162"), bytes("616263"))));     // a prefix: unchanged
    assertEquals("616263", hex(Table.shortestSeparator(bytes("616263"), bytes("6162"))));
    assertEquals("ff01", hex(Table.shortestSeparator(bytes("ff01"), bytes("ff02")))); // 01 + 1 is not below 02
    assertEquals("ff", hex(Table.shortestSeparator(bytes("ff"), bytes("ff00"))));
  }

  @Test
  void shortSuccessorFollowsLevelDb() {
    assertEquals("62", hex(Table.shortSuccessor(bytes("616263"))));
    assertEquals("ff62", hex(Table.shortSuccessor(bytes("ff61"))));
    assertEquals("ffff", hex(Table.shortSuccessor(bytes("ffff")))); // no successor shorter: unchanged
    assertEquals("", hex(Table.shortSuccessor(new byte[0])));
  }

  @Test
  void varintsUpToTenBytes() throws IOException {
    ByteBuffer b = ByteBuffer.allocate(10);
    Table.putVarint(b, -1L);
    assertEquals("ffffffffffffffffff01", hex(b.array()));
    assertEquals(-1L, Table.getVarint(ByteBuffer.wrap(b.array())));
    assertEquals(300, Table.getVarint(ByteBuffer.wrap(bytes("ac02"))));
    assertEquals("malformed varint",
        assertThrows(IOException.class, () -> Table.getVarint(ByteBuffer.wrap(bytes("ffffffffffffffffffff01")))).getMessage());
    assertEquals("truncated varint", assertThrows(IOException.class, () -> Table.getVarint(ByteBuffer.wrap(bytes("80"))))
        .getMessage());
  }

  /** A file that is only a footer: magic, and handles pointing where the test says. */
  private static byte[] footerOnly(long indexOffset, long indexSize) {
    ByteBuffer footer = ByteBuffer.allocate(48).order(ByteOrder.LITTLE_ENDIAN);
    Table.putVarint(footer, 0);
    Table.putVarint(footer, 0);
    Table.putVarint(footer, indexOffset);
    Table.putVarint(footer, indexSize);
    footer.putLong(40, 0xdb4775248b80fb57L);
    return footer.array();
  }

  @Test
  void aReaderRefusesWhatIsNotATable() {
    assertEquals("f: file is too short to be an sstable (47 bytes)",
        assertThrows(IOException.class, () -> Table.read(new byte[47], "f")).getMessage());
    assertEquals("f: not an sstable (bad magic number)",
        assertThrows(IOException.class, () -> Table.read(new byte[48], "f")).getMessage());
    assertEquals("f: block (0, 44) lies outside the 48-byte file",
        assertThrows(IOException.class, () -> Table.read(footerOnly(0, 44), "f")).getMessage());
    assertEquals("f: block (0, 1000) lies outside the 48-byte file",
        assertThrows(IOException.class, () -> Table.read(footerOnly(0, 1000), "f")).getMessage());
    assertEquals("f: block (0, 7) lies outside the 48-byte file",
        assertThrows(IOException.class, () -> Table.read(footerOnly(0, 7), "f")).getMessage());
    // a block whose trailer ends exactly at the end of the file lies inside it (here: the footer's
    // own bytes, whose byte 43 is not block type 0)
    assertEquals("f: compressed block (type -117) is not supported",
        assertThrows(IOException.class, () -> Table.read(footerOnly(0, 43), "f")).getMessage());
  }

  @Test
  void aCompressedOrCorruptBlockIsRefused() throws IOException {
    TreeMap<byte[], byte[]> entries = new TreeMap<>(Table.KEY_ORDER);
    entries.put(bytes("6b"), bytes("76"));
    byte[] file = Table.write(entries);
    assertEquals(1, Table.read(file, "f").size());
    byte[] compressed = file.clone();
    // the first block (the data block: 6 bytes of entry, restart 0, count 1) has its type byte at 13
    compressed[13] = 1;
    assertEquals("f: compressed block (type 1) is not supported",
        assertThrows(IOException.class, () -> Table.read(compressed, "f")).getMessage());
    byte[] corrupt = file.clone();
    corrupt[3] ^= 1;
    assertEquals("f: block checksum mismatch at offset 0",
        assertThrows(IOException.class, () -> Table.read(corrupt, "f")).getMessage());
  }

  @Test
  void anEmptyTableReadsAsNoEntries() throws IOException {
    // its index block is the smallest a block can be: no entries, one restart, 8 bytes
    assertEquals(0, Table.read(Table.write(new TreeMap<>(Table.KEY_ORDER)), "f").size());
  }

  @Test
  void entriesLargerThanABlockRoundTrip() throws IOException {
    TreeMap<byte[], byte[]> entries = new TreeMap<>(Table.KEY_ORDER);
    byte[] big = new byte[600 << 10];
    big[12345] = 7;
    entries.put(bytes("00"), bytes("01"));
    entries.put(bytes("61"), big);
    entries.put(bytes("62"), bytes("02"));
    entries.put(bytes("63"), new byte[300 << 10]);
    TreeMap<byte[], byte[]> read = Table.read(Table.write(entries), "f");
    assertEquals(4, read.size());
    assertArrayEquals(big, read.get(bytes("61")));
    assertArrayEquals(bytes("02"), read.get(bytes("62")));
    assertEquals(300 << 10, read.get(bytes("63")).length);
  }
}
