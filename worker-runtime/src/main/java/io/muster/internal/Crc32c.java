package io.muster.internal;

import java.util.zip.CRC32C;

/** CRC-32C (Castagnoli) and TensorFlow's mask, used by TFRecord files and checkpoint bundles. */
public final class Crc32c {
  private static final int MASK_DELTA = 0xa282ead8;

  private Crc32c() {}

  public static int of(byte[] data, int offset, int length) {
    CRC32C crc = new CRC32C();
    crc.update(data, offset, length);
    return (int) crc.getValue();
  }

  public static int of(byte[] data) {
    return of(data, 0, data.length);
  }

  /** {@code rotateRight(crc, 15) + 0xa282ead8}: stored CRCs are masked so CRCs of CRCs stay distinct. */
  public static int mask(int crc) {
    return Integer.rotateRight(crc, 15) + MASK_DELTA;
  }

  public static int unmask(int masked) {
    return Integer.rotateLeft(masked - MASK_DELTA, 15);
  }
}
