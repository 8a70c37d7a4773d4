package io.muster.coordinator;

import com.google.protobuf.ByteString;
import com.google.protobuf.UnsafeByteOperations;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;

/**
 * An argument or a result of a scheduled function: nothing, a float32 or int64 array with a shape,
 * bytes (or a UTF-8 string), or a per-worker resource. Values cross the network as raw
 * little-endian bytes in protobuf, never through Java serialization. Immutable.
 */
public final class Value {

  public enum Kind { NONE, FLOAT32, INT64, BYTES, RESOURCE }

  public static final Value NONE = new Value(Kind.NONE, new long[0], ByteString.EMPTY, 0);

  private final Kind kind;
  private final long[] shape;
  private final ByteString data;
  private final long resource;

  private Value(Kind kind, long[] shape, ByteString data, long resource) {
    this.kind = kind;
    this.shape = shape;
    this.data = data;
    this.resource = resource;
  }

  public static Value of(float scalar) {
    return of(new float[] {scalar}, new long[0]);
  }

  public static Value of(float[] values) {
    return of(values, new long[] {values.length});
  }

  public static Value of(float[] values, long[] shape) {
    checkShape(values.length, shape);
    ByteBuffer bytes = ByteBuffer.allocate(values.length * Float.BYTES).order(ByteOrder.LITTLE_ENDIAN);
    bytes.asFloatBuffer().put(values);
    return new Value(Kind.FLOAT32, shape.clone(), UnsafeByteOperations.unsafeWrap(bytes.array()), 0);
  }

  public static Value of(long scalar) {
    return of(new long[] {scalar}, new long[0]);
  }

  public static Value of(long[] values, long[] shape) {
    checkShape(values.length, shape);
    ByteBuffer bytes = ByteBuffer.allocate(values.length * Long.BYTES).order(ByteOrder.LITTLE_ENDIAN);
    bytes.asLongBuffer().put(values);
    return new Value(Kind.INT64, shape.clone(), UnsafeByteOperations.unsafeWrap(bytes.array()), 0);
  }

  public static Value of(String text) {
    return new Value(Kind.BYTES, new long[0], ByteString.copyFromUtf8(text), 0);
  }

  public static Value ofBytes(byte[] bytes) {
    return new Value(Kind.BYTES, new long[0], ByteString.copyFrom(bytes), 0);
  }

  static Value resource(long id) {
    return new Value(Kind.RESOURCE, new long[0], ByteString.EMPTY, id);
  }

  public Kind kind() {
    return kind;
  }

  public long[] shape() {
    return shape.clone();
  }

  public float[] floats() {
    require(Kind.FLOAT32);
    float[] out = new float[data.size() / Float.BYTES];
    data.asReadOnlyByteBuffer().order(ByteOrder.LITTLE_ENDIAN).asFloatBuffer().get(out);
    return out;
  }

  /** The one float of a scalar (or one-element) float32 value. */
  public float floatValue() {
    float[] values = floats();
    if (values.length != 1) {
      throw new IllegalStateException("value of shape " + Arrays.toString(shape) + " is not a scalar");
    }
    return values[0];
  }

  public long[] longs() {
    require(Kind.INT64);
    long[] out = new long[data.size() / Long.BYTES];
    data.asReadOnlyByteBuffer().order(ByteOrder.LITTLE_ENDIAN).asLongBuffer().get(out);
    return out;
  }

  /** The one long of a scalar (or one-element) int64 value. */
  public long longValue() {
    long[] values = longs();
    if (values.length != 1) {
      throw new IllegalStateException("value of shape " + Arrays.toString(shape) + " is not a scalar");
    }
    return values[0];
  }

  public byte[] bytes() {
    require(Kind.BYTES);
    return data.toByteArray();
  }

  public String string() {
    require(Kind.BYTES);
    return data.toString(StandardCharsets.UTF_8);
  }

  long resourceId() {
    require(Kind.RESOURCE);
    return resource;
  }

  io.muster.proto.coordinator.Value toProto() {
    io.muster.proto.coordinator.Value.Builder b = io.muster.proto.coordinator.Value.newBuilder()
        .setKind(io.muster.proto.coordinator.Value.Kind.valueOf(kind.name())).setData(data).setResource(resource);
    for (long d : shape) {
      b.addShape(d);
    }
    return b.build();
  }

  static Value fromProto(io.muster.proto.coordinator.Value p) {
    if (p.getKind() == io.muster.proto.coordinator.Value.Kind.UNRECOGNIZED) {
      throw new IllegalArgumentException("unknown value kind " + p.getKindValue());
    }
    Kind kind = Kind.valueOf(p.getKind().name());
    long[] shape = p.getShapeList().stream().mapToLong(Long::longValue).toArray();
    int width = kind == Kind.FLOAT32 ? Float.BYTES : kind == Kind.INT64 ? Long.BYTES : 0;
    if (width > 0) {
      long elements = 1;
      for (long d : shape) {
        elements *= d;
      }
      if (elements * width != p.getData().size()) {
        throw new IllegalArgumentException("a " + kind + " value of shape " + Arrays.toString(shape) + " needs "
            + elements * width + " bytes, got " + p.getData().size());
      }
    }
    return kind == Kind.NONE ? NONE : new Value(kind, shape, p.getData(), p.getResource());
  }

  private void require(Kind wanted) {
    if (kind != wanted) {
      throw new IllegalStateException("value is " + kind + ", not " + wanted);
    }
  }

  private static void checkShape(int length, long[] shape) {
    long elements = 1;
    for (long d : shape) {
      if (d < 0) {
        throw new IllegalArgumentException("shape " + Arrays.toString(shape) + " has a negative dimension");
      }
      elements *= d;
    }
    if (elements != length) {
      throw new IllegalArgumentException("shape " + Arrays.toString(shape) + " holds " + elements + " values, got "
          + length);
    }
  }

  @Override
  public String toString() {
    return switch (kind) {
      case NONE -> "none";
      case FLOAT32 -> data.size() <= 64 ? Arrays.toString(floats()) : "float32" + Arrays.toString(shape);
      case INT64 -> data.size() <= 64 ? Arrays.toString(longs()) : "int64" + Arrays.toString(shape);
      case BYTES -> data.size() + " bytes";
      case RESOURCE -> "resource " + resource;
    };
  }
}
