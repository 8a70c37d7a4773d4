package io.muster.collective;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

/**
 * The element-wise kernels on their own, with literal values: each op on each type combines
 * exactly the {@code count} elements at the given byte offsets and leaves every other byte alone.
 */
class ReductionsTest {

  /** dst and src as written into 6-element buffers: elements 1..4 are combined, 0 and 5 are guards. */
  private static final long[] DST = {100, 3, -2, 7, 0, 100};
  private static final long[] SRC = {-100, 5, -6, 7, 9, -100};

  private static ByteBuffer buffer(DataType type, long... values) {
    ByteBuffer b = ByteBuffer.allocate(values.length * type.bytes()).order(ByteOrder.LITTLE_ENDIAN);
    for (int i = 0; i < values.length; i++) {
      switch (type) {
        case FLOAT32 -> b.putFloat(i * 4, values[i]);
        case FLOAT64 -> b.putDouble(i * 8, values[i]);
        case INT32 -> b.putInt(i * 4, (int) values[i]);
        case INT64 -> b.putLong(i * 8, values[i]);
      }
    }
    return b;
  }

  private static double[] read(DataType type, ByteBuffer b) {
    double[] out = new double[b.capacity() / type.bytes()];
    for (int i = 0; i < out.length; i++) {
      out[i] = switch (type) {
        case FLOAT32 -> b.getFloat(i * 4);
        case FLOAT64 -> b.getDouble(i * 8);
        case INT32 -> b.getInt(i * 4);
        case INT64 -> b.getLong(i * 8);
      };
    }
    return out;
  }

  private static double[] combined(DataType type, ReduceOp op) {
    ByteBuffer dst = buffer(type, DST);
    // src sits one element further in its buffer than dst: the offsets are independent
    ByteBuffer src = buffer(type, 0, SRC[0], SRC[1], SRC[2], SRC[3], SRC[4], SRC[5]);
    Reductions.combine(type, op, dst, type.bytes(), dst, type.bytes(), src, 2 * type.bytes(), 4);
    return read(type, dst);
  }

  @ParameterizedTest
  @EnumSource(DataType.class)
  void sumAndMeanAdd(DataType type) {
    assertArrayEquals(new double[] {100, 8, -8, 14, 9, 100}, combined(type, ReduceOp.SUM));
    assertArrayEquals(new double[] {100, 8, -8, 14, 9, 100}, combined(type, ReduceOp.MEAN), "MEAN adds; divide ends it");
  }

  @ParameterizedTest
  @EnumSource(DataType.class)
  void productMultiplies(DataType type) {
    assertArrayEquals(new double[] {100, 15, 12, 49, 0, 100}, combined(type, ReduceOp.PRODUCT));
  }

  @ParameterizedTest
  @EnumSource(DataType.class)
  void minAndMaxPickPerElement(DataType type) {
    assertArrayEquals(new double[] {100, 3, -6, 7, 0, 100}, combined(type, ReduceOp.MIN));
    assertArrayEquals(new double[] {100, 5, -2, 7, 9, 100}, combined(type, ReduceOp.MAX));
  }

  @ParameterizedTest
  @EnumSource(DataType.class)
  void zeroElementsChangeNothing(DataType type) {
    ByteBuffer dst = buffer(type, DST);
    Reductions.combine(type, ReduceOp.SUM, dst, 0, dst, 0, buffer(type, SRC), 0, 0);
    Reductions.divide(type, dst, 0, 0, 3);
    assertArrayEquals(read(type, buffer(type, DST)), read(type, dst));
  }

  @ParameterizedTest
  @EnumSource(DataType.class)
  void divideEndsMeanInTheTypesArithmetic(DataType type) {
    ByteBuffer b = buffer(type, 9, 7, -7, 6, 1, 9);
    Reductions.divide(type, b, type.bytes(), 4, 3);
    boolean integer = type == DataType.INT32 || type == DataType.INT64;
    double[] expected = integer
        ? new double[] {9, 2, -2, 2, 0, 9} // truncated toward zero, as TensorFlow's integer division
        : new double[] {9, 7.0 / 3, -7.0 / 3, 2, 1.0 / 3, 9};
    if (type == DataType.FLOAT32) {
      expected = new double[] {9, 7f / 3, -7f / 3, 2, 1f / 3, 9};
    }
    assertArrayEquals(expected, read(type, b));
  }

  @ParameterizedTest
  @EnumSource(DataType.class)
  void directBuffersAreCombinedInPlace(DataType type) {
    ByteBuffer dst = ByteBuffer.allocateDirect(6 * type.bytes()).order(ByteOrder.LITTLE_ENDIAN);
    dst.put(buffer(type, DST)).clear();
    ByteBuffer src = ByteBuffer.allocateDirect(6 * type.bytes()).order(ByteOrder.LITTLE_ENDIAN);
    src.put(buffer(type, SRC)).clear();
    Reductions.combine(type, ReduceOp.SUM, dst, 0, src, 0, dst, 0, 6);
    assertArrayEquals(new double[] {0, 8, -8, 14, 9, 0}, read(type, dst));
  }

  @ParameterizedTest
  @EnumSource(DataType.class)
  void aThirdBufferTakesTheResultAndTheOperandsStay(DataType type) {
    ByteBuffer a = buffer(type, DST);
    ByteBuffer b = buffer(type, SRC);
    ByteBuffer out = buffer(type, 1, 1, 1, 1, 1, 1, 1);
    Reductions.combine(type, ReduceOp.MAX, out, type.bytes(), a, 0, b, type.bytes(), 5);
    assertArrayEquals(new double[] {1, 100, 3, 7, 9, 0, 1}, read(type, out));
    assertArrayEquals(read(type, buffer(type, DST)), read(type, a));
    assertArrayEquals(read(type, buffer(type, SRC)), read(type, b));
  }
}
