package io.muster.collective;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.DoubleBuffer;
import java.nio.FloatBuffer;
import java.nio.IntBuffer;
import java.nio.LongBuffer;

/**
 * The element-wise kernels: {@code out[i] = a[i] (op) b[i]} on little-endian buffers (out may be
 * a or b), and the final division of MEAN. The operands' order is kept, so that ranks combining the
 * same values in the same order get the same bits, even for NaNs.
 *
 * <p>The buffers are worked through in blocks that are copied into arrays, combined there and
 * copied back: the JIT turns a loop over arrays into vector instructions, which it does not do for
 * a loop over a (direct) buffer, and the copies are memory copies of blocks that stay in the
 * core's cache. On a 1 MiB float32 sum that is about 1.7 times as fast as the loop over typed views.
 */
final class Reductions {
  private Reductions() {}

  /** Elements per block: two blocks of the widest type fill 32 KiB, a core's first-level data cache. */
  private static final int BLOCK = 2048;
  private static final ThreadLocal<Scratch> SCRATCH = ThreadLocal.withInitial(Scratch::new);

  /** One thread's blocks, per type. */
  private static final class Scratch {
    final float[] floatA = new float[BLOCK];
    final float[] floatB = new float[BLOCK];
    final double[] doubleA = new double[BLOCK];
    final double[] doubleB = new double[BLOCK];
    final int[] intA = new int[BLOCK];
    final int[] intB = new int[BLOCK];
    final long[] longA = new long[BLOCK];
    final long[] longB = new long[BLOCK];
  }

  /**
   * {@code out = a (op) b} for {@code count} elements at the given byte offsets; {@code out} may be
   * the same bytes as {@code a} or {@code b}.
   */
  static void combine(DataType type, ReduceOp op, ByteBuffer out, int outOff, ByteBuffer a, int aOff, ByteBuffer b,
      int bOff, int count) {
    int bytes = count * type.bytes();
    ByteBuffer o = view(out, outOff, bytes);
    ByteBuffer x = view(a, aOff, bytes);
    ByteBuffer y = view(b, bOff, bytes);
    Scratch s = SCRATCH.get();
    switch (type) {
      case FLOAT32 -> combine(op, o.asFloatBuffer(), x.asFloatBuffer(), y.asFloatBuffer(), count, s.floatA, s.floatB);
      case FLOAT64 -> combine(op, o.asDoubleBuffer(), x.asDoubleBuffer(), y.asDoubleBuffer(), count, s.doubleA, s.doubleB);
      case INT32 -> combine(op, o.asIntBuffer(), x.asIntBuffer(), y.asIntBuffer(), count, s.intA, s.intB);
      case INT64 -> combine(op, o.asLongBuffer(), x.asLongBuffer(), y.asLongBuffer(), count, s.longA, s.longB);
    }
  }

  /** The bytes as a little-endian buffer of their own: {@code buffer} itself when it is exactly that already. */
  private static ByteBuffer view(ByteBuffer buffer, int offset, int bytes) {
    if (offset == buffer.position() && bytes == buffer.remaining() && buffer.order() == ByteOrder.LITTLE_ENDIAN) {
      return buffer;
    }
    return buffer.duplicate().limit(offset + bytes).position(offset).order(ByteOrder.LITTLE_ENDIAN);
  }

  private static void combine(ReduceOp op, FloatBuffer o, FloatBuffer a, FloatBuffer b, int count, float[] x, float[] y) {
    for (int at = 0; at < count; at += BLOCK) {
      int n = Math.min(BLOCK, count - at);
      a.get(at, x, 0, n);
      b.get(at, y, 0, n);
      switch (op) {
        case SUM, MEAN -> {
          for (int i = 0; i < n; i++) {
            x[i] = x[i] + y[i];
          }
        }
        case PRODUCT -> {
          for (int i = 0; i < n; i++) {
            x[i] = x[i] * y[i];
          }
        }
        case MIN -> {
          for (int i = 0; i < n; i++) {
            x[i] = Math.min(x[i], y[i]);
          }
        }
        case MAX -> {
          for (int i = 0; i < n; i++) {
            x[i] = Math.max(x[i], y[i]);
          }
        }
      }
      o.put(at, x, 0, n);
    }
  }

  private static void combine(ReduceOp op, DoubleBuffer o, DoubleBuffer a, DoubleBuffer b, int count, double[] x,
      double[] y) {
    for (int at = 0; at < count; at += BLOCK) {
      int n = Math.min(BLOCK, count - at);
      a.get(at, x, 0, n);
      b.get(at, y, 0, n);
      switch (op) {
        case SUM, MEAN -> {
          for (int i = 0; i < n; i++) {
            x[i] = x[i] + y[i];
          }
        }
        case PRODUCT -> {
          for (int i = 0; i < n; i++) {
            x[i] = x[i] * y[i];
          }
        }
        case MIN -> {
          for (int i = 0; i < n; i++) {
            x[i] = Math.min(x[i], y[i]);
          }
        }
        case MAX -> {
          for (int i = 0; i < n; i++) {
            x[i] = Math.max(x[i], y[i]);
          }
        }
      }
      o.put(at, x, 0, n);
    }
  }

  private static void combine(ReduceOp op, IntBuffer o, IntBuffer a, IntBuffer b, int count, int[] x, int[] y) {
    for (int at = 0; at < count; at += BLOCK) {
      int n = Math.min(BLOCK, count - at);
      a.get(at, x, 0, n);
      b.get(at, y, 0, n);
      switch (op) {
        case SUM, MEAN -> {
          for (int i = 0; i < n; i++) {
            x[i] = x[i] + y[i];
          }
        }
        case PRODUCT -> {
          for (int i = 0; i < n; i++) {
            x[i] = x[i] * y[i];
          }
        }
        case MIN -> {
          for (int i = 0; i < n; i++) {
            x[i] = Math.min(x[i], y[i]);
          }
        }
        case MAX -> {
          for (int i = 0; i < n; i++) {
            x[i] = Math.max(x[i], y[i]);
          }
        }
      }
      o.put(at, x, 0, n);
    }
  }

  private static void combine(ReduceOp op, LongBuffer o, LongBuffer a, LongBuffer b, int count, long[] x, long[] y) {
    for (int at = 0; at < count; at += BLOCK) {
      int n = Math.min(BLOCK, count - at);
      a.get(at, x, 0, n);
      b.get(at, y, 0, n);
      switch (op) {
        case SUM, MEAN -> {
          for (int i = 0; i < n; i++) {
            x[i] = x[i] + y[i];
          }
        }
        case PRODUCT -> {
          for (int i = 0; i < n; i++) {
            x[i] = x[i] * y[i];
          }
        }
        case MIN -> {
          for (int i = 0; i < n; i++) {
            x[i] = Math.min(x[i], y[i]);
          }
        }
        case MAX -> {
          for (int i = 0; i < n; i++) {
            x[i] = Math.max(x[i], y[i]);
          }
        }
      }
      o.put(at, x, 0, n);
    }
  }

  /** MEAN's last step: divide {@code count} elements at byte offset {@code off} by the group size. */
  static void divide(DataType type, ByteBuffer buffer, int off, int count, int groupSize) {
    ByteBuffer b = view(buffer, off, count * type.bytes());
    switch (type) {
      case FLOAT32 -> {
        FloatBuffer v = b.asFloatBuffer();
        for (int i = 0; i < count; i++) {
          v.put(i, v.get(i) / groupSize);
        }
      }
      case FLOAT64 -> {
        DoubleBuffer v = b.asDoubleBuffer();
        for (int i = 0; i < count; i++) {
          v.put(i, v.get(i) / groupSize);
        }
      }
      case INT32 -> {
        IntBuffer v = b.asIntBuffer();
        for (int i = 0; i < count; i++) {
          v.put(i, v.get(i) / groupSize);
        }
      }
      case INT64 -> {
        LongBuffer v = b.asLongBuffer();
        for (int i = 0; i < count; i++) {
          v.put(i, v.get(i) / groupSize);
        }
      }
    }
  }
}
