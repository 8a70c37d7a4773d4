package io.muster.examples;

import java.io.IOException;
import java.util.Arrays;
import java.util.List;
import java.util.UUID;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.spark.api.java.JavaPairRDD;
import org.apache.spark.sql.Column;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.functions;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.NumericType;
import org.apache.spark.sql.types.StructType;
import scala.Tuple2;

/**
 * The demo's checks of its inputs, made on the driver before any training task starts: the output
 * directory takes a file, and a data file has a {@code label} column of integers {@code >= 0}
 * (the number of classes is the largest label + 1), numeric feature columns and no empty cells.
 * Each failure is an {@link InvalidInputException} whose message is one line naming the file (or
 * {@code --out}), the column and, for a bad value, its row: rows are counted from 1, the header
 * not counted.
 */
final class DemoData {

  /** The data or the output directory cannot be used; the message says which, where and why. */
  static final class InvalidInputException extends RuntimeException {
    InvalidInputException(String message) {
      super(message);
    }
  }

  private DemoData() {}

  /** Creates {@code out} if needed, then creates and deletes a probe file in it. */
  static void checkWritable(Configuration hadoop, Path out) {
    Path probe = new Path(out, ".muster-probe-" + UUID.randomUUID());
    try {
      FileSystem fs = out.getFileSystem(hadoop);
      if (!fs.mkdirs(out)) {
        throw new IOException("cannot create the directory");
      }
      fs.create(probe, false).close();
      if (!fs.delete(probe, false)) {
        throw new IOException("cannot delete the probe file " + probe);
      }
    } catch (IOException | RuntimeException e) {
      throw new InvalidInputException("--out " + out + " is not writable: " + firstLine(e));
    }
  }

  /**
   * Checks {@code df}, read from {@code file}, and returns its number of classes.
   *
   * @throws InvalidInputException at the first problem found
   */
  static int check(Dataset<Row> df, String file) {
    StructType schema = df.schema();
    List<String> columns = Arrays.asList(df.columns());
    int label = columns.indexOf("label");
    if (label < 0) {
      throw new InvalidInputException(file + " has no 'label' column; its columns: " + String.join(", ", columns));
    }
    if (df.isEmpty()) {
      throw new InvalidInputException(file + " has no rows" + (file.endsWith(".parquet") ? "" : " after its header"));
    }
    for (int c = 0; c < columns.size(); c++) {
      DataType type = schema.fields()[c].dataType();
      if (!(type instanceof NumericType) && !type.equals(DataTypes.StringType)) {
        throw new InvalidInputException(file + ": column '" + columns.get(c) + "' is " + type.simpleString()
            + ", not numeric");
      }
    }
    // One pass over the rows; a string column (inferred so because some value is not a number) has
    // at least one bad value, and this finds the first.
    JavaPairRDD<Row, Long> indexed = df.javaRDD().zipWithIndex();
    List<Tuple2<Long, String>> bad = indexed
        .mapToPair(t -> new Tuple2<>(t._2(), problem(t._1(), schema, label)))
        .filter(t -> t._2() != null).take(1);
    if (!bad.isEmpty()) {
      throw new InvalidInputException(file + " row " + (bad.get(0)._1() + 1) + ": " + bad.get(0)._2());
    }
    Column labels = functions.trim(functions.col("label").cast(DataTypes.StringType)).cast(DataTypes.DoubleType);
    return (int) ((Number) df.agg(functions.max(labels)).first().get(0)).longValue() + 1;
  }

  /**
   * {@code df} with its string columns (checked: every value a number) as doubles, for the tasks'
   * arithmetic; numeric columns as they are, so the held-out split (a hash of the values) stays.
   */
  static Dataset<Row> numeric(Dataset<Row> df) {
    Column[] columns = Arrays.stream(df.schema().fields())
        .map(f -> f.dataType().equals(DataTypes.StringType)
            ? functions.trim(functions.col(f.name())).cast(DataTypes.DoubleType).as(f.name())
            : functions.col(f.name()))
        .toArray(Column[]::new);
    return df.select(columns);
  }

  /** What is wrong with one row (null: nothing). */
  private static String problem(Row row, StructType schema, int label) {
    for (int c = 0; c < row.length(); c++) {
      String name = schema.fields()[c].name();
      if (row.isNullAt(c)) {
        return "column '" + name + "' is empty; fill it in, or give --drop-nulls to skip rows with empty cells";
      }
      Object value = row.get(c);
      if (c == label) {
        if (!isClass(value)) {
          return "column 'label' holds '" + value + "', not a class (an integer >= 0)";
        }
      } else if (value instanceof String s ? !isNumber(s) : !Double.isFinite(((Number) value).doubleValue())) {
        return "column '" + name + "' holds '" + value + "', not a " + (value instanceof String ? "" : "finite ")
            + "number";
      }
    }
    return null;
  }

  private static boolean isClass(Object value) {
    double d;
    if (value instanceof Number n) {
      d = n.doubleValue();
    } else {
      try {
        d = Long.parseLong(value.toString().trim());
      } catch (NumberFormatException e) {
        return false;
      }
    }
    return d >= 0 && d == Math.floor(d) && d <= Integer.MAX_VALUE - 1;
  }

  private static boolean isNumber(String s) {
    try {
      return Double.isFinite(Double.parseDouble(s.trim()));
    } catch (NumberFormatException e) {
      return false;
    }
  }

  private static String firstLine(Throwable e) {
    String message = e.getMessage() == null ? e.getClass().getSimpleName() : e.getMessage();
    int newline = message.indexOf('\n');
    return newline < 0 ? message : message.substring(0, newline);
  }
}
