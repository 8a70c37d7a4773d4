package io.muster.data;

import io.muster.internal.Crc32c;
import java.io.IOException;
import java.io.OutputStream;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;

/**
 * TFRecord framing, as TensorFlow writes it: {@code u64 length | masked crc32c(length) | data |
 * masked crc32c(data)}, little-endian. The stream is the caller's; {@link #close()} closes it.
 */
public final class TfRecordWriter implements AutoCloseable {
  private final OutputStream out;
  private final ByteBuffer header = ByteBuffer.allocate(12).order(ByteOrder.LITTLE_ENDIAN);
  private final ByteBuffer footer = ByteBuffer.allocate(4).order(ByteOrder.LITTLE_ENDIAN);

  public TfRecordWriter(OutputStream out) {
    this.out = out;
  }

  public void write(byte[] record) throws IOException {
    header.clear().putLong(record.length);
    header.putInt(Crc32c.mask(Crc32c.of(header.array(), 0, 8)));
    out.write(header.array(), 0, 12);
    out.write(record);
    footer.clear().putInt(Crc32c.mask(Crc32c.of(record)));
    out.write(footer.array(), 0, 4);
  }

  public void flush() throws IOException {
    out.flush();
  }

  @Override
  public void close() throws IOException {
    out.close();
  }
}
