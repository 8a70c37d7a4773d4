package io.muster.ps;

import com.google.protobuf.ByteString;
import com.google.protobuf.UnsafeByteOperations;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.ArrayList;
import java.util.List;

/** float32 arrays as raw little-endian bytes, cut into chunks of at most {@link #CHUNK_BYTES}. */
final class Payloads {

  /** Well under gRPC's default 4 MiB message limit. */
  static final int CHUNK_BYTES = 1 << 20;
  private static final int CHUNK_FLOATS = CHUNK_BYTES / Float.BYTES;

  private Payloads() {}

  static List<ByteString> chunks(float[] values) {
    List<ByteString> chunks = new ArrayList<>(values.length / CHUNK_FLOATS + 1);
    for (int start = 0; start < values.length || chunks.isEmpty(); start += CHUNK_FLOATS) {
      int n = Math.min(CHUNK_FLOATS, values.length - start);
      ByteBuffer bytes = ByteBuffer.allocate(n * Float.BYTES).order(ByteOrder.LITTLE_ENDIAN);
      bytes.asFloatBuffer().put(values, start, n);
      chunks.add(UnsafeByteOperations.unsafeWrap(bytes.array()));
    }
    return chunks;
  }

  /** Collects chunks into an array of a size known in advance, refusing more or fewer bytes. */
  static final class Assembler {
    private final float[] values;
    private final String what;
    private int filled;

    Assembler(int floats, String what) {
      this.values = new float[floats];
      this.what = what;
    }

    void add(ByteString chunk) {
      if (chunk.size() % Float.BYTES != 0 || filled + chunk.size() / Float.BYTES > values.length) {
        throw new IllegalArgumentException(what + " needs " + values.length + " float32 values ("
            + (long) values.length * Float.BYTES + " bytes); got more, or a partial value");
      }
      chunk.asReadOnlyByteBuffer().order(ByteOrder.LITTLE_ENDIAN).asFloatBuffer().get(values, filled,
          chunk.size() / Float.BYTES);
      filled += chunk.size() / Float.BYTES;
    }

    float[] complete() {
      if (filled != values.length) {
        throw new IllegalArgumentException(what + " needs " + values.length + " float32 values, got " + filled);
      }
      return values;
    }
  }
}
