package io.muster.checkpoint;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import io.muster.proto.tf.DataType;
import java.util.List;
import org.junit.jupiter.api.Test;

/** A checkpoint's tensor value: validated on construction, read back by dtype, equal by content. */
class TensorTest {

  private static String error(Runnable r) {
    return assertThrows(IllegalArgumentException.class, r::run).getMessage();
  }

  @Test
  void theDataMustMatchTheShapeAndDtype() {
    assertEquals("tensor shape [2, -1] has a negative dimension", error(() -> Tensor.ofFloats(new long[] {2, -1})));
    assertEquals("a float32 tensor of shape [3] needs 12 bytes, got 8", error(() -> Tensor.ofFloats(new long[] {3}, 1, 2)));
    assertEquals("a int64 tensor of shape [] needs 8 bytes, got none",
        error(() -> new Tensor(DataType.DT_INT64, new long[0], null, null)));
    assertEquals("a string tensor of shape [2] needs 2 elements, got 1", error(() -> Tensor.ofStrings(new long[] {2}, "a")));
    assertEquals("a string tensor of shape [] needs 1 elements, got none",
        error(() -> new Tensor(DataType.DT_STRING, new long[0], null, null)));
    assertEquals("dtype DT_INVALID is not supported in checkpoints by Muster",
        error(() -> new Tensor(DataType.DT_INVALID, new long[0], new byte[0], null)));
  }

  @Test
  void valuesReadBackByTheirDtypeOnly() {
    assertArrayEquals(new double[] {0.5, -2}, Tensor.ofDoubles(new long[] {2}, 0.5, -2).doubles());
    assertArrayEquals(new int[] {7, -7}, Tensor.ofInts(new long[] {2}, 7, -7).ints());
    assertArrayEquals(new long[] {1L << 40}, Tensor.ofLongs(new long[] {1}, 1L << 40).longs());
    assertArrayEquals(new byte[] {1, 0, 1}, Tensor.ofBooleans(new long[] {3}, true, false, true).data());
    assertEquals("tensor is int32, not float32",
        assertThrows(IllegalStateException.class, () -> Tensor.ofInts(new long[] {1}, 1).floats()).getMessage());
  }

  @Test
  void elementSizesAndNamesAreTensorFlows() {
    assertEquals(1, Tensor.elementSize(DataType.DT_UINT8));
    assertEquals(2, Tensor.elementSize(DataType.DT_BFLOAT16));
    assertEquals(4, Tensor.elementSize(DataType.DT_UINT32));
    assertEquals(8, Tensor.elementSize(DataType.DT_COMPLEX64));
    assertEquals(16, Tensor.elementSize(DataType.DT_COMPLEX128));
    assertEquals(List.of("float32", "float64", "int32", "int64", "bool", "string", "uint8", "int8", "int16", "uint16",
        "uint32", "uint64", "float16", "bfloat16", "complex64", "complex128", "DT_INVALID"), List.of(DataType.DT_FLOAT,
        DataType.DT_DOUBLE, DataType.DT_INT32, DataType.DT_INT64, DataType.DT_BOOL, DataType.DT_STRING, DataType.DT_UINT8,
        DataType.DT_INT8, DataType.DT_INT16, DataType.DT_UINT16, DataType.DT_UINT32, DataType.DT_UINT64, DataType.DT_HALF,
        DataType.DT_BFLOAT16, DataType.DT_COMPLEX64, DataType.DT_COMPLEX128, DataType.DT_INVALID).stream()
        .map(Tensor::dtypeName).toList());
    assertEquals(6, Tensor.numElements(new long[] {2, 3}));
    assertEquals(1, Tensor.numElements(new long[0]));
    assertThrows(ArithmeticException.class, () -> Tensor.numElements(new long[] {1L << 32, 1L << 32}));
  }

  @Test
  void equalByDtypeShapeAndContent() {
    Tensor a = Tensor.ofFloats(new long[] {2}, 1, 2);
    assertEquals(a, Tensor.ofFloats(new long[] {2}, 1, 2));
    assertEquals(a.hashCode(), Tensor.ofFloats(new long[] {2}, 1, 2).hashCode());
    assertNotEquals(a, Tensor.ofFloats(new long[] {2}, 1, 3));
    assertNotEquals(a, Tensor.ofFloats(new long[] {1, 2}, 1, 2));
    assertNotEquals(a, Tensor.ofInts(new long[] {2}, 1, 2));
    assertNotEquals(a, "a");
    Tensor s = Tensor.ofStrings(new long[] {2}, "x", "y");
    assertEquals(s, Tensor.ofStrings(new long[] {2}, "x", "y"));
    assertNotEquals(s, Tensor.ofStrings(new long[] {2}, "x", "z"));
    assertNotEquals(s, new Tensor(DataType.DT_UINT8, new long[] {2}, new byte[2], null));
    assertNotEquals(new Tensor(DataType.DT_UINT8, new long[] {2}, new byte[2], null), s);
    assertEquals("float32[2]", a.toString());
    assertEquals("string[2]", s.toString());
    long[] shape = {2};
    Tensor copied = Tensor.ofFloats(shape, 1, 2);
    shape[0] = 5;
    assertArrayEquals(new long[] {2}, copied.shape(), "the shape is copied");
  }
}
