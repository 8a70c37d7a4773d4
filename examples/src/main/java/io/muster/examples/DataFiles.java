package io.muster.examples;

import io.muster.examples.DemoData.InvalidInputException;
import java.io.IOException;
import java.io.InputStream;
import java.nio.ByteBuffer;
import java.nio.CharBuffer;
import java.nio.charset.CharsetDecoder;
import java.nio.charset.CoderResult;
import java.nio.charset.CodingErrorAction;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FSDataInputStream;
import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.parquet.hadoop.ParquetFileReader;
import org.apache.parquet.hadoop.util.HadoopInputFile;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructType;
import scala.Tuple2;

/**
 * The {@code --data} of the demo and {@code spark-run}: a Parquet file (a name ending in
 * {@code .parquet}, or a directory of them) or a CSV file with a header, read by Spark after the
 * checks its format allows on the driver. A file that is not what its name says, a CSV row whose
 * cells do not match the header, or a file Spark cannot read is an {@link InvalidInputException}
 * whose message is one line naming the file and, for a bad row, the row (counted from 1, the header
 * not counted).
 */
final class DataFiles {
  private static final byte[] PARQUET_MAGIC = "PAR1".getBytes(StandardCharsets.US_ASCII);
  /** How much of a CSV file is read to tell whether it is text. */
  private static final int TEXT_PROBE = 64 * 1024;
  private static final String CORRUPT = "_corrupt_record";

  private DataFiles() {}

  static Dataset<Row> read(SparkSession spark, String data) {
    boolean parquet = data.endsWith(".parquet");
    Configuration hadoop = spark.sparkContext().hadoopConfiguration();
    try {
      for (DataFile file : files(hadoop, data)) {
        if (parquet) {
          checkParquet(file, hadoop);
        } else {
          checkText(file, hadoop);
        }
      }
    } catch (IOException e) {
      throw new InvalidInputException("cannot read --data " + data + ": " + firstLine(e));
    }
    Dataset<Row> df;
    try {
      df = parquet ? spark.read().parquet(data) : csv(spark, data, null);
      df.schema();
    } catch (Exception e) { // Spark's AnalysisException, or a SparkException Scala throws undeclared
      throw new InvalidInputException(data + " cannot be read as " + (parquet ? "Parquet" : "CSV") + ": "
          + firstLine(rootCause(e)));
    }
    if (!parquet) {
      checkRows(spark, data, df.schema());
    }
    return df;
  }

  private static Dataset<Row> csv(SparkSession spark, String data, StructType schema) {
    var reader = spark.read().option("header", "true");
    return schema == null ? reader.option("inferSchema", "true").csv(data)
        : reader.schema(schema).option("columnNameOfCorruptRecord", CORRUPT).csv(data);
  }

  /** A file of the data, and its name in messages: {@code --data} as given, or that and its name in the directory. */
  private record DataFile(String name, FileStatus status) {}

  /** The data files of a file or directory: those not hidden ({@code _SUCCESS}, {@code .crc} files). */
  private static List<DataFile> files(Configuration hadoop, String data) throws IOException {
    Path path = new Path(data);
    FileSystem fs = path.getFileSystem(hadoop);
    FileStatus status = fs.getFileStatus(path);
    if (status.isFile()) {
      return List.of(new DataFile(data, status));
    }
    List<DataFile> files = new ArrayList<>();
    for (FileStatus f : fs.listStatus(path)) {
      String name = f.getPath().getName();
      if (f.isFile() && !name.startsWith("_") && !name.startsWith(".")) {
        files.add(new DataFile(data.replaceAll("/+$", "") + "/" + name, f));
      }
    }
    if (files.isEmpty()) {
      throw new InvalidInputException(data + " is a directory without data files");
    }
    return files;
  }

  /** A Parquet file begins and ends with its magic bytes; a truncated or foreign file does not. */
  private static void checkParquet(DataFile file, Configuration hadoop) throws IOException {
    byte[] head = new byte[PARQUET_MAGIC.length];
    byte[] tail = new byte[PARQUET_MAGIC.length];
    Path path = file.status().getPath();
    long length = file.status().getLen();
    if (length >= 2L * PARQUET_MAGIC.length) {
      try (FSDataInputStream in = path.getFileSystem(hadoop).open(path)) {
        in.readFully(0, head);
        in.readFully(length - tail.length, tail);
      }
    }
    if (!Arrays.equals(head, PARQUET_MAGIC) || !Arrays.equals(tail, PARQUET_MAGIC)) {
      throw new InvalidInputException(file.name() + " is not a Parquet file (" + length + " bytes, without "
          + "Parquet's PAR1 marks at its start and end: truncated, or another format); give a Parquet file, or a CSV "
          + "file whose name does not end in .parquet");
    }
    // its footer (the schema and where the row groups are), read by the reader Spark itself uses
    try (ParquetFileReader reader = ParquetFileReader.open(HadoopInputFile.fromStatus(file.status(), hadoop))) {
      reader.getFooter();
    } catch (IOException | RuntimeException e) {
      throw new InvalidInputException(file.name() + " is not a readable Parquet file: its footer is corrupt ("
          + firstLine(rootCause(e)) + ")");
    }
  }

  /** A CSV file's first bytes are UTF-8 text without NUL bytes; a binary file's are not. */
  private static void checkText(DataFile file, Configuration hadoop) throws IOException {
    Path path = file.status().getPath();
    long length = file.status().getLen();
    if (length == 0) {
      throw new InvalidInputException(file.name() + " is empty; a CSV file needs a header line and rows");
    }
    byte[] bytes;
    try (InputStream in = path.getFileSystem(hadoop).open(path)) {
      bytes = in.readNBytes(TEXT_PROBE);
    }
    CharsetDecoder utf8 = StandardCharsets.UTF_8.newDecoder().onMalformedInput(CodingErrorAction.REPORT)
        .onUnmappableCharacter(CodingErrorAction.REPORT);
    ByteBuffer in = ByteBuffer.wrap(bytes);
    CharBuffer out = CharBuffer.allocate(bytes.length);
    // not the end of input when the probe stops short of the file's end: a character may span the cut
    CoderResult result = utf8.decode(in, out, bytes.length == length);
    int bad = result.isError() ? in.position() : -1;
    for (int i = 0; i < (bad < 0 ? bytes.length : bad); i++) {
      if (bytes[i] == 0) {
        bad = i;
        break;
      }
    }
    if (bad >= 0) {
      throw new InvalidInputException(file.name() + " is not a CSV text file: byte " + (bad + 1) + " (0x"
          + String.format("%02x", bytes[bad] & 0xff) + ") is not UTF-8 text; give a CSV file with a header line, or "
          + "a Parquet file named *.parquet");
    }
  }

  /** The first CSV row whose cells are more or fewer than the header's, by its row number. */
  private static void checkRows(SparkSession spark, String data, StructType schema) {
    if (schema.fields().length == 0) {
      throw new InvalidInputException(data + " has no header line");
    }
    StructType withCorrupt = schema.add(CORRUPT, DataTypes.StringType);
    int corrupt = withCorrupt.fieldIndex(CORRUPT);
    List<Tuple2<String, Long>> bad = csv(spark, data, withCorrupt).javaRDD().zipWithIndex()
        .filter(t -> !t._1().isNullAt(corrupt))
        .map(t -> new Tuple2<>(t._1().getString(corrupt), t._2()))
        .take(1);
    if (!bad.isEmpty()) {
      String line = bad.get(0)._1();
      throw new InvalidInputException(data + " row " + (bad.get(0)._2() + 1) + " does not have the header's "
          + schema.fields().length + " columns: '" + (line.length() > 60 ? line.substring(0, 60) + "…" : line)
          + "'");
    }
  }

  private static Throwable rootCause(Throwable e) {
    Throwable root = e;
    while (root.getCause() != null && root.getCause() != root) {
      root = root.getCause();
    }
    return root;
  }

  private static String firstLine(Throwable e) {
    String message = e.getMessage() == null ? e.getClass().getSimpleName() : e.getMessage();
    return message.lines().findFirst().orElse("").strip();
  }
}
