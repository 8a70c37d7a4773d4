package io.muster.data;

import io.muster.internal.Crc32c;
import java.io.IOException;
import java.io.InputStream;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.Optional;

/**
 * Reads TFRecord files and checks both CRCs of every record. A file that ends inside a record (a
 * writer killed mid-write) is reported with {@link TruncatedRecordException}, never silently cut
 * short; a CRC mismatch is {@link CorruptRecordException}. Both name the source and the offset.
 */
public final class TfRecordReader implements AutoCloseable {

  /** The file ends in the middle of a record. */
  public static final class TruncatedRecordException extends IOException {
    TruncatedRecordException(String message) {
      super(message);
    }
  }

  /** A record's length or data does not match its CRC. */
  public static final class CorruptRecordException extends IOException {
    CorruptRecordException(String message) {
      super(message);
    }
  }

  private static final long MAX_RECORD = 1L << 31;

  private final InputStream in;
  private final String source;
  private long offset;

  public TfRecordReader(InputStream in, String source) {
    this.in = in;
    this.source = source;
  }

  /** The next record, or empty at a clean end of file. */
  public Optional<byte[]> next() throws IOException {
    byte[] header = new byte[12];
    int got = in.readNBytes(header, 0, 12);
    if (got == 0) {
      return Optional.empty();
    }
    if (got < 12) {
      throw new TruncatedRecordException(source + ": truncated record header at offset " + offset + " (" + got
          + " of 12 bytes); the writer probably died mid-write");
    }
    ByteBuffer h = ByteBuffer.wrap(header).order(ByteOrder.LITTLE_ENDIAN);
    long length = h.getLong(0);
    if (Crc32c.mask(Crc32c.of(header, 0, 8)) != h.getInt(8)) {
      throw new CorruptRecordException(source + ": corrupt record length at offset " + offset + " (CRC mismatch)");
    }
    if (length < 0 || length > MAX_RECORD) {
      throw new CorruptRecordException(source + ": record length " + length + " at offset " + offset + " is not plausible");
    }
    byte[] data = in.readNBytes((int) length);
    byte[] footer = in.readNBytes(4);
    if (data.length < length || footer.length < 4) {
      throw new TruncatedRecordException(source + ": truncated record at offset " + offset + ": " + length
          + " data bytes announced, the file ends first; the writer probably died mid-write");
    }
    if (Crc32c.mask(Crc32c.of(data)) != ByteBuffer.wrap(footer).order(ByteOrder.LITTLE_ENDIAN).getInt()) {
      throw new CorruptRecordException(source + ": corrupt record data at offset " + offset + " (CRC mismatch)");
    }
    offset += 16 + length;
    return Optional.of(data);
  }

  @Override
  public void close() throws IOException {
    in.close();
  }
}
