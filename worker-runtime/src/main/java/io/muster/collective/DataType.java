package io.muster.collective;

/** Element types the collectives carry; elements travel little-endian. */
public enum DataType {
  FLOAT32(4),
  FLOAT64(8),
  INT32(4),
  INT64(8);

  private final int bytes;

  DataType(int bytes) {
    this.bytes = bytes;
  }

  public int bytes() {
    return bytes;
  }
}
