package io.muster.checkpoint;

import io.muster.proto.tf.DataType;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.List;

/**
 * A tensor as a checkpoint stores it: a TensorFlow dtype, a shape, and the elements in row-major
 * order, little-endian ({@code data}) or, for strings, one byte array per element.
 */
public record Tensor(DataType dtype, long[] shape, byte[] data, List<byte[]> strings) {

  public Tensor {
    shape = shape.clone();
    for (long d : shape) {
      if (d < 0) {
        throw new IllegalArgumentException("tensor shape " + Arrays.toString(shape) + " has a negative dimension");
      }
    }
    long n = numElements(shape);
    if (dtype == DataType.DT_STRING) {
      if (strings == null || strings.size() != n) {
        throw new IllegalArgumentException("a string tensor of shape " + Arrays.toString(shape) + " needs " + n
            + " elements, got " + (strings == null ? "none" : strings.size()));
      }
      strings = List.copyOf(strings);
      data = null;
    } else {
      int size = elementSize(dtype);
      if (data == null || data.length != n * size) {
        throw new IllegalArgumentException("a " + dtypeName(dtype) + " tensor of shape " + Arrays.toString(shape)
            + " needs " + n * size + " bytes, got " + (data == null ? "none" : data.length));
      }
      strings = null;
    }
  }

  public static Tensor ofFloats(long[] shape, float... values) {
    ByteBuffer b = ByteBuffer.allocate(4 * values.length).order(ByteOrder.LITTLE_ENDIAN);
    b.asFloatBuffer().put(values);
    return new Tensor(DataType.DT_FLOAT, shape, b.array(), null);
  }

  public static Tensor ofDoubles(long[] shape, double... values) {
    ByteBuffer b = ByteBuffer.allocate(8 * values.length).order(ByteOrder.LITTLE_ENDIAN);
    b.asDoubleBuffer().put(values);
    return new Tensor(DataType.DT_DOUBLE, shape, b.array(), null);
  }

  public static Tensor ofInts(long[] shape, int... values) {
    ByteBuffer b = ByteBuffer.allocate(4 * values.length).order(ByteOrder.LITTLE_ENDIAN);
    b.asIntBuffer().put(values);
    return new Tensor(DataType.DT_INT32, shape, b.array(), null);
  }

  public static Tensor ofLongs(long[] shape, long... values) {
    ByteBuffer b = ByteBuffer.allocate(8 * values.length).order(ByteOrder.LITTLE_ENDIAN);
    b.asLongBuffer().put(values);
    return new Tensor(DataType.DT_INT64, shape, b.array(), null);
  }

  public static Tensor ofBooleans(long[] shape, boolean... values) {
    byte[] b = new byte[values.length];
    for (int i = 0; i < values.length; i++) {
      b[i] = (byte) (values[i] ? 1 : 0);
    }
    return new Tensor(DataType.DT_BOOL, shape, b, null);
  }

  public static Tensor ofStrings(long[] shape, String... values) {
    return new Tensor(DataType.DT_STRING, shape, null,
        Arrays.stream(values).map(v -> v.getBytes(StandardCharsets.UTF_8)).toList());
  }

  public static Tensor scalar(long value) {
    return ofLongs(new long[0], value);
  }

  public long numElements() {
    return numElements(shape);
  }

  public float[] floats() {
    float[] out = new float[(int) numElements()];
    buffer(DataType.DT_FLOAT).asFloatBuffer().get(out);
    return out;
  }

  public double[] doubles() {
    double[] out = new double[(int) numElements()];
    buffer(DataType.DT_DOUBLE).asDoubleBuffer().get(out);
    return out;
  }

  public int[] ints() {
    int[] out = new int[(int) numElements()];
    buffer(DataType.DT_INT32).asIntBuffer().get(out);
    return out;
  }

  public long[] longs() {
    long[] out = new long[(int) numElements()];
    buffer(DataType.DT_INT64).asLongBuffer().get(out);
    return out;
  }

  private ByteBuffer buffer(DataType expected) {
    if (dtype != expected) {
      throw new IllegalStateException("tensor is " + dtypeName(dtype) + ", not " + dtypeName(expected));
    }
    return ByteBuffer.wrap(data).order(ByteOrder.LITTLE_ENDIAN);
  }

  static long numElements(long[] shape) {
    long n = 1;
    for (long d : shape) {
      n = Math.multiplyExact(n, d);
    }
    return n;
  }

  /** Bytes per element of a fixed-size dtype. */
  static int elementSize(DataType dtype) {
    return switch (dtype) {
      case DT_BOOL, DT_INT8, DT_UINT8 -> 1;
      case DT_INT16, DT_UINT16, DT_HALF, DT_BFLOAT16 -> 2;
      case DT_FLOAT, DT_INT32, DT_UINT32 -> 4;
      case DT_DOUBLE, DT_INT64, DT_UINT64, DT_COMPLEX64 -> 8;
      case DT_COMPLEX128 -> 16;
      default -> throw new IllegalArgumentException("dtype " + dtype + " is not supported in checkpoints by Muster");
    };
  }

  /** TensorFlow's Python name: {@code float32}, {@code int64}, {@code string}, ... */
  public static String dtypeName(DataType dtype) {
    return switch (dtype) {
      case DT_FLOAT -> "float32";
      case DT_DOUBLE -> "float64";
      case DT_INT32 -> "int32";
      case DT_INT64 -> "int64";
      case DT_BOOL -> "bool";
      case DT_STRING -> "string";
      case DT_UINT8 -> "uint8";
      case DT_INT8 -> "int8";
      case DT_INT16 -> "int16";
      case DT_UINT16 -> "uint16";
      case DT_UINT32 -> "uint32";
      case DT_UINT64 -> "uint64";
      case DT_HALF -> "float16";
      case DT_BFLOAT16 -> "bfloat16";
      case DT_COMPLEX64 -> "complex64";
      case DT_COMPLEX128 -> "complex128";
      default -> dtype.name();
    };
  }

  @Override
  public boolean equals(Object o) {
    return o instanceof Tensor t && dtype == t.dtype && Arrays.equals(shape, t.shape) && Arrays.equals(data, t.data)
        && (strings == null ? t.strings == null : t.strings != null && stringsEqual(strings, t.strings));
  }

  private static boolean stringsEqual(List<byte[]> a, List<byte[]> b) {
    if (a.size() != b.size()) {
      return false;
    }
    for (int i = 0; i < a.size(); i++) {
      if (!Arrays.equals(a.get(i), b.get(i))) {
        return false;
      }
    }
    return true;
  }

  @Override
  public int hashCode() {
    return 31 * dtype.hashCode() + Arrays.hashCode(shape);
  }

  @Override
  public String toString() {
    return dtypeName(dtype) + Arrays.toString(shape);
  }
}
