package io.muster.spark;

import com.google.protobuf.ByteString;
import io.muster.data.ExampleSchema;
import io.muster.data.ExampleSchema.Column;
import io.muster.data.ExampleSchema.FeatureKind;
import io.muster.proto.tf.BytesList;
import io.muster.proto.tf.Example;
import io.muster.proto.tf.Feature;
import io.muster.proto.tf.Features;
import io.muster.proto.tf.FloatList;
import io.muster.proto.tf.Int64List;
import java.lang.reflect.Method;
import java.math.BigDecimal;
import java.nio.charset.StandardCharsets;
import java.time.Instant;
import java.time.LocalDate;
import java.time.temporal.ChronoUnit;
import java.util.ArrayList;
import java.util.List;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.types.ArrayType;
import org.apache.spark.sql.types.BinaryType;
import org.apache.spark.sql.types.BooleanType;
import org.apache.spark.sql.types.ByteType;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DateType;
import org.apache.spark.sql.types.DecimalType;
import org.apache.spark.sql.types.DoubleType;
import org.apache.spark.sql.types.FloatType;
import org.apache.spark.sql.types.IntegerType;
import org.apache.spark.sql.types.LongType;
import org.apache.spark.sql.types.ShortType;
import org.apache.spark.sql.types.StringType;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.types.TimestampType;
import org.apache.spark.sql.types.UserDefinedType;

/**
 * DataFrame rows as {@code tf.train.Example}s, one feature per column: integers, booleans (0/1),
 * dates (days since 1970-01-01) and timestamps (microseconds since the epoch) as {@code int64_list};
 * floats, doubles and decimals as {@code float_list} (float32, TensorFlow's only float feature);
 * strings (UTF-8) and binary as {@code bytes_list}; arrays of those, and Spark ML vectors, as lists.
 * A null value leaves the feature out of that row's Example. Other types are refused up front.
 */
final class RowExamples {

  private interface Encoder {
    Feature encode(Object value);
  }

  private final String[] names;
  private final Encoder[] encoders;
  private final ExampleSchema schema;

  /** @throws IllegalArgumentException naming the column whose type has no tf.train.Feature */
  RowExamples(StructType type) {
    StructField[] fields = type.fields();
    names = new String[fields.length];
    encoders = new Encoder[fields.length];
    List<Column> columns = new ArrayList<>();
    for (int i = 0; i < fields.length; i++) {
      StructField field = fields[i];
      names[i] = field.name();
      DataType dataType = field.dataType();
      boolean list = dataType instanceof ArrayType || dataType instanceof UserDefinedType;
      FeatureKind kind;
      if (dataType instanceof ArrayType array) {
        // Spark marks most arrays as containing nulls; a null element is refused only when one appears.
        kind = scalarKind(array.elementType(), field);
        encoders[i] = list(kind, array.elementType(), field.name());
      } else if (dataType instanceof UserDefinedType<?> udt) {
        kind = FeatureKind.FLOAT;
        encoders[i] = vector(udt, field.name());
      } else {
        kind = scalarKind(dataType, field);
        Encoder one = list(kind, dataType, field.name());
        encoders[i] = value -> one.encode(List.of(value));
      }
      columns.add(new Column(field.name(), dataType.simpleString(), kind, list, field.nullable()));
    }
    schema = new ExampleSchema(columns);
  }

  ExampleSchema schema() {
    return schema;
  }

  Example toExample(Row row) {
    Features.Builder features = Features.newBuilder();
    for (int i = 0; i < encoders.length; i++) {
      Object value = row.get(i);
      if (value != null) {
        features.putFeature(names[i], encoders[i].encode(value));
      }
    }
    return Example.newBuilder().setFeatures(features).build();
  }

  private static FeatureKind scalarKind(DataType type, StructField field) {
    if (type instanceof BooleanType || type instanceof ByteType || type instanceof ShortType
        || type instanceof IntegerType || type instanceof LongType || type instanceof DateType
        || type instanceof TimestampType) {
      return FeatureKind.INT64;
    }
    if (type instanceof FloatType || type instanceof DoubleType || type instanceof DecimalType) {
      return FeatureKind.FLOAT;
    }
    if (type instanceof StringType || type instanceof BinaryType) {
      return FeatureKind.BYTES;
    }
    throw new IllegalArgumentException("column '" + field.name() + "' has type " + field.dataType().simpleString()
        + ", which has no tf.train.Feature; select it away or flatten it into numeric, string, binary or array "
        + "columns before training");
  }

  /** An encoder for a Scala/Java sequence (or a one-element list) of {@code element} values. */
  private static Encoder list(FeatureKind kind, DataType element, String column) {
    return value -> {
      Iterable<?> values = value instanceof scala.collection.Iterable<?> seq
          ? scala.jdk.javaapi.CollectionConverters.asJava(seq) : (Iterable<?>) value;
      switch (kind) {
        case INT64 -> {
          Int64List.Builder out = Int64List.newBuilder();
          for (Object v : values) {
            out.addValue(toLong(notNull(v, column), element));
          }
          return Feature.newBuilder().setInt64List(out).build();
        }
        case FLOAT -> {
          FloatList.Builder out = FloatList.newBuilder();
          for (Object v : values) {
            Object n = notNull(v, column);
            out.addValue(n instanceof BigDecimal d ? d.floatValue() : ((Number) n).floatValue());
          }
          return Feature.newBuilder().setFloatList(out).build();
        }
        default -> {
          BytesList.Builder out = BytesList.newBuilder();
          for (Object v : values) {
            Object b = notNull(v, column);
            out.addValue(b instanceof byte[] bytes ? ByteString.copyFrom(bytes)
                : ByteString.copyFrom(b.toString(), StandardCharsets.UTF_8));
          }
          return Feature.newBuilder().setBytesList(out).build();
        }
      }
    };
  }

  private static long toLong(Object v, DataType type) {
    if (v instanceof Boolean b) {
      return b ? 1 : 0;
    }
    if (v instanceof Number n) {
      return n.longValue();
    }
    if (v instanceof java.sql.Date d) {
      return d.toLocalDate().toEpochDay();
    }
    if (v instanceof LocalDate d) {
      return d.toEpochDay();
    }
    if (v instanceof java.sql.Timestamp t) {
      return ChronoUnit.MICROS.between(Instant.EPOCH, t.toInstant());
    }
    if (v instanceof Instant t) {
      return ChronoUnit.MICROS.between(Instant.EPOCH, t);
    }
    throw new IllegalArgumentException("unexpected " + v.getClass().getName() + " in a " + type.simpleString()
        + " column");
  }

  private static Object notNull(Object v, String column) {
    if (v == null) {
      throw new IllegalArgumentException("column '" + column + "' holds an array with a null element, which a "
          + "tf.train.Feature list cannot hold; fill or drop the nulls first (e.g. filter or transform with coalesce)");
    }
    return v;
  }

  /** Spark ML vectors ({@code VectorAssembler}'s output), dense or sparse, as dense float lists. */
  private static Encoder vector(UserDefinedType<?> udt, String column) {
    Method toArray;
    try {
      toArray = udt.userClass().getMethod("toArray");
    } catch (NoSuchMethodException e) {
      throw new IllegalArgumentException("column '" + column + "' has the user-defined type " + udt.simpleString()
          + ", which has no tf.train.Feature (only Spark ML vectors are converted); convert it before training");
    }
    return value -> {
      double[] values;
      try {
        values = (double[]) toArray.invoke(value);
      } catch (ReflectiveOperationException e) {
        throw new IllegalStateException("cannot read the vector in column '" + column + "'", e);
      }
      FloatList.Builder out = FloatList.newBuilder();
      for (double v : values) {
        out.addValue((float) v);
      }
      return Feature.newBuilder().setFloatList(out).build();
    };
  }
}
