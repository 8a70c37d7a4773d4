package io.muster.spark;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;

import io.muster.data.ExampleSchema;
import io.muster.proto.tf.Example;
import io.muster.proto.tf.Feature;
import java.io.Serializable;
import java.math.BigDecimal;
import java.sql.Timestamp;
import java.time.Instant;
import java.util.Arrays;
import java.util.List;
import org.apache.spark.sql.RowFactory;
import org.apache.spark.sql.catalyst.util.ArrayData;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.types.UserDefinedType;
import org.junit.jupiter.api.Test;
import scala.jdk.javaapi.CollectionConverters;

/** Rows to tf.train.Example, column by column, without a Spark context. */
class RowExamplesTest {

  /** A vector type in the shape of Spark ML's (its UDT's user class has {@code double[] toArray()}). */
  public static final class Point implements Serializable {
    private final double[] values;

    public Point(double... values) {
      this.values = values;
    }

    public double[] toArray() {
      return values;
    }
  }

  public static final class PointUdt extends UserDefinedType<Point> {
    @Override
    public DataType sqlType() {
      return DataTypes.createArrayType(DataTypes.DoubleType, false);
    }

    @Override
    public Object serialize(Point p) {
      return ArrayData.toArrayData(p.toArray());
    }

    @Override
    public Point deserialize(Object datum) {
      return new Point(((ArrayData) datum).toDoubleArray());
    }

    @Override
    public Class<Point> userClass() {
      return Point.class;
    }
  }

  @Test
  void everySupportedTypeBecomesTheFeatureTensorFlowParses() {
    StructType schema = new StructType().add("ts", DataTypes.TimestampType).add("price", DataTypes.createDecimalType(10, 2))
        .add("tiny", DataTypes.ByteType).add("names", DataTypes.createArrayType(DataTypes.StringType))
        .add("features", new PointUdt()).add("missing", DataTypes.DoubleType);
    RowExamples examples = new RowExamples(schema);
    Example e = examples.toExample(RowFactory.create(Timestamp.from(Instant.ofEpochSecond(3, 500_000)),
        new BigDecimal("12.34"), (byte) -7, CollectionConverters.asScala(List.of("a", "β")).toSeq(),
        new Point(0.5, -2), null));
    var f = e.getFeatures().getFeatureMap();
    assertEquals(List.of(3_000_500L), f.get("ts").getInt64List().getValueList());
    assertEquals(List.of(12.34f), f.get("price").getFloatList().getValueList());
    assertEquals(List.of(-7L), f.get("tiny").getInt64List().getValueList());
    assertEquals(List.of("a", "β"), f.get("names").getBytesList().getValueList().stream()
        .map(b -> b.toStringUtf8()).toList());
    assertEquals(List.of(0.5f, -2f), f.get("features").getFloatList().getValueList());
    assertFalse(f.containsKey("missing"), "a null leaves the feature out");
    assertEquals(Feature.KindCase.FLOAT_LIST, f.get("features").getKindCase());

    List<ExampleSchema.Column> columns = examples.schema().columns();
    assertEquals(List.of("timestamp", "decimal(10,2)", "tinyint", "array<string>", "pointudt", "double"),
        columns.stream().map(ExampleSchema.Column::sourceType).toList());
    assertEquals(Arrays.asList(false, false, false, true, true, false),
        columns.stream().map(ExampleSchema.Column::list).toList());
    assertEquals(examples.schema(), ExampleSchema.parse(examples.schema().toJson()), "schema.json reads back");
  }

  @Test
  void aNullInsideAnArrayIsRefusedNamingTheColumn() {
    RowExamples examples = new RowExamples(new StructType().add("v", DataTypes.createArrayType(DataTypes.IntegerType)));
    IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> examples.toExample(
        RowFactory.create(CollectionConverters.asScala(Arrays.asList(1, null)).toSeq())));
    assertEquals("column 'v' holds an array with a null element, which a tf.train.Feature list cannot hold; fill or "
        + "drop the nulls first (e.g. filter or transform with coalesce)", e.getMessage());
  }
}
