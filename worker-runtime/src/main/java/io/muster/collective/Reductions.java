package io.muster.collective;

import java.nio.ByteBuffer;

/**
 * The element-wise kernels: {@code dst[i] = dst[i] (op) src[i]} on little-endian buffers, and the
 * final division of MEAN. One loop per type and op, so no branch runs per element.
 */
final class Reductions {
  private Reductions() {}

  /** Combines {@code count} elements of {@code src} at {@code srcOff} into {@code dst} at {@code dstOff} (byte offsets). */
  static void combine(DataType type, ReduceOp op, ByteBuffer dst, int dstOff, ByteBuffer src, int srcOff, int count) {
    switch (type) {
      case FLOAT32 -> combineFloat(op, dst, dstOff, src, srcOff, count);
      case FLOAT64 -> combineDouble(op, dst, dstOff, src, srcOff, count);
      case INT32 -> combineInt(op, dst, dstOff, src, srcOff, count);
      case INT64 -> combineLong(op, dst, dstOff, src, srcOff, count);
    }
  }

  private static void combineFloat(ReduceOp op, ByteBuffer d, int dOff, ByteBuffer s, int sOff, int n) {
    int end = dOff + 4 * n;
    switch (op) {
      case SUM, MEAN -> {
        for (int i = dOff, j = sOff; i < end; i += 4, j += 4) {
          d.putFloat(i, d.getFloat(i) + s.getFloat(j));
        }
      }
      case PRODUCT -> {
        for (int i = dOff, j = sOff; i < end; i += 4, j += 4) {
          d.putFloat(i, d.getFloat(i) * s.getFloat(j));
        }
      }
      case MIN -> {
        for (int i = dOff, j = sOff; i < end; i += 4, j += 4) {
          d.putFloat(i, Math.min(d.getFloat(i), s.getFloat(j)));
        }
      }
      case MAX -> {
        for (int i = dOff, j = sOff; i < end; i += 4, j += 4) {
          d.putFloat(i, Math.max(d.getFloat(i), s.getFloat(j)));
        }
      }
    }
  }

  private static void combineDouble(ReduceOp op, ByteBuffer d, int dOff, ByteBuffer s, int sOff, int n) {
    int end = dOff + 8 * n;
    switch (op) {
      case SUM, MEAN -> {
        for (int i = dOff, j = sOff; i < end; i += 8, j += 8) {
          d.putDouble(i, d.getDouble(i) + s.getDouble(j));
        }
      }
      case PRODUCT -> {
        for (int i = dOff, j = sOff; i < end; i += 8, j += 8) {
          d.putDouble(i, d.getDouble(i) * s.getDouble(j));
        }
      }
      case MIN -> {
        for (int i = dOff, j = sOff; i < end; i += 8, j += 8) {
          d.putDouble(i, Math.min(d.getDouble(i), s.getDouble(j)));
        }
      }
      case MAX -> {
        for (int i = dOff, j = sOff; i < end; i += 8, j += 8) {
          d.putDouble(i, Math.max(d.getDouble(i), s.getDouble(j)));
        }
      }
    }
  }

  private static void combineInt(ReduceOp op, ByteBuffer d, int dOff, ByteBuffer s, int sOff, int n) {
    int end = dOff + 4 * n;
    switch (op) {
      case SUM, MEAN -> {
        for (int i = dOff, j = sOff; i < end; i += 4, j += 4) {
          d.putInt(i, d.getInt(i) + s.getInt(j));
        }
      }
      case PRODUCT -> {
        for (int i = dOff, j = sOff; i < end; i += 4, j += 4) {
          d.putInt(i, d.getInt(i) * s.getInt(j));
        }
      }
      case MIN -> {
        for (int i = dOff, j = sOff; i < end; i += 4, j += 4) {
          d.putInt(i, Math.min(d.getInt(i), s.getInt(j)));
        }
      }
      case MAX -> {
        for (int i = dOff, j = sOff; i < end; i += 4, j += 4) {
          d.putInt(i, Math.max(d.getInt(i), s.getInt(j)));
        }
      }
    }
  }

  private static void combineLong(ReduceOp op, ByteBuffer d, int dOff, ByteBuffer s, int sOff, int n) {
    int end = dOff + 8 * n;
    switch (op) {
      case SUM, MEAN -> {
        for (int i = dOff, j = sOff; i < end; i += 8, j += 8) {
          d.putLong(i, d.getLong(i) + s.getLong(j));
        }
      }
      case PRODUCT -> {
        for (int i = dOff, j = sOff; i < end; i += 8, j += 8) {
          d.putLong(i, d.getLong(i) * s.getLong(j));
        }
      }
      case MIN -> {
        for (int i = dOff, j = sOff; i < end; i += 8, j += 8) {
          d.putLong(i, Math.min(d.getLong(i), s.getLong(j)));
        }
      }
      case MAX -> {
        for (int i = dOff, j = sOff; i < end; i += 8, j += 8) {
          d.putLong(i, Math.max(d.getLong(i), s.getLong(j)));
        }
      }
    }
  }

  /** MEAN's last step: divide {@code count} elements at byte offset {@code off} by the group size. */
  static void divide(DataType type, ByteBuffer b, int off, int count, int groupSize) {
    switch (type) {
      case FLOAT32 -> {
        for (int i = off, end = off + 4 * count; i < end; i += 4) {
          b.putFloat(i, b.getFloat(i) / groupSize);
        }
      }
      case FLOAT64 -> {
        for (int i = off, end = off + 8 * count; i < end; i += 8) {
          b.putDouble(i, b.getDouble(i) / groupSize);
        }
      }
      case INT32 -> {
        for (int i = off, end = off + 4 * count; i < end; i += 4) {
          b.putInt(i, b.getInt(i) / groupSize);
        }
      }
      case INT64 -> {
        for (int i = off, end = off + 8 * count; i < end; i += 8) {
          b.putLong(i, b.getLong(i) / groupSize);
        }
      }
    }
  }
}
