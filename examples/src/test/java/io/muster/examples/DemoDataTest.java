package io.muster.examples;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.stream.Stream;
import org.apache.spark.sql.SparkSession;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * The demo checks its data and its output directory before training starts: bad data is one line
 * naming the file, the row (counted from 1 after the header) and the column, exit 1, and nothing is
 * written to {@code --out}.
 */
class DemoDataTest {

  private static SparkSession spark;

  @BeforeAll
  static void start() {
    spark = SparkSession.builder().master("local[2]").appName("muster-demo-data-test")
        .config("spark.ui.enabled", "false").config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1").getOrCreate();
  }

  @AfterAll
  static void stop() {
    if (spark != null) {
      spark.stop();
    }
  }

  private record Outcome(int code, String out, String err) {}

  private static Outcome demo(String... args) {
    ByteArrayOutputStream out = new ByteArrayOutputStream();
    ByteArrayOutputStream err = new ByteArrayOutputStream();
    int code = SparkDemo.run(args, new PrintStream(out, true), new PrintStream(err, true), options -> spark);
    return new Outcome(code, out.toString(StandardCharsets.UTF_8), err.toString(StandardCharsets.UTF_8));
  }

  /** 40 good rows of two features and labels 0..2, with {@code row} (1-based) replaced by {@code bad}. */
  private static String rows(int row, String bad) {
    List<String> lines = new ArrayList<>(List.of("p0,p1,label"));
    for (int r = 1; r <= 40; r++) {
      lines.add(r == row ? bad : (r % 3) + "." + r + "," + (r % 5) + "," + (r % 3));
    }
    return String.join("\n", lines) + "\n";
  }

  static Stream<Arguments> badData() {
    return Stream.of(
        Arguments.of("a non-numeric feature", rows(7, "1.5,abc,1"), "row 7: column 'p1' holds 'abc', not a number"),
        Arguments.of("a header-only CSV", "p0,p1,label\n", "has no rows after its header"),
        Arguments.of("a label cat", rows(3, "1.5,2,cat"), "row 3: column 'label' holds 'cat', not a class (an integer >= 0)"),
        Arguments.of("a label -1", rows(12, "1.5,2,-1"), "row 12: column 'label' holds '-1', not a class (an integer >= 0)"),
        Arguments.of("a label 1.5", rows(12, "1.5,2,1.5"), "row 12: column 'label' holds '1.5', not a class (an integer >= 0)"),
        Arguments.of("an empty cell", rows(5, "1.5,,1"),
            "row 5: column 'p1' is empty; fill it in, or give --drop-nulls to skip rows with empty cells"),
        Arguments.of("no label column", "p0,p1,class\n1,2,0\n", "has no 'label' column; its columns: p0, p1, class"),
        Arguments.of("fewer rows than the global batch", rows(0, ""),
            "has 33 training rows (after holding out 1 in 5), fewer than --global-batch 64: each of the 2 workers"
                + " needs a full batch of 32; give more rows or a smaller --global-batch"));
  }

  @ParameterizedTest(name = "{0}")
  @MethodSource("badData")
  void badDataIsOneLineNamingFileRowAndColumnExitOneBeforeTraining(String name, String csv, String line,
      @TempDir Path tmp) throws Exception {
    Path data = Files.writeString(tmp.resolve("data.csv"), csv);
    Path out = tmp.resolve("out");
    String[] args = {"--data", data.toString(), "--out", out.toString(), "--workers", "2", "--epochs", "1"};
    if (name.startsWith("fewer")) {
      args = new String[] {"--data", data.toString(), "--out", out.toString(), "--workers", "2", "--epochs", "1",
          "--global-batch", "64"};
    }
    Outcome o = demo(args);
    assertEquals(1, o.code(), o.err());
    assertEquals("muster demo: " + data + " " + line + "\n", o.err());
    assertEquals("", o.out());
    try (Stream<Path> files = Files.list(out)) {
      assertEquals(List.of(), files.toList(), "nothing trained, nothing written");
    }
  }

  private static final String GOOD = "p0,p1,label\n1,2,0\n3,4,1\n5,6,2\n";

  /**
   * Files that are not what their name says, for the demo and spark-run alike: each case writes its
   * --data under the directory it is given and returns it; the line starts with the data's name.
   */
  static Stream<Arguments> badFiles() {
    return Stream.of(
        Arguments.of("a PNG named .csv", (DataCase) dir -> Files.write(dir.resolve("d.csv"),
            new byte[] {(byte) 0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n', 0, 0, 0, 13}),
            " is not a CSV text file: byte 1 (0x89) is not UTF-8 text; give a CSV file with a header line, or a Parquet"
                + " file named *.parquet"),
        Arguments.of("a CSV with a NUL byte", (DataCase) dir -> Files.write(dir.resolve("d.csv"),
            (GOOD + "7,8\0,0\n").getBytes(StandardCharsets.UTF_8)),
            " is not a CSV text file: byte 34 (0x00) is not UTF-8 text"),
        Arguments.of("an empty file", (DataCase) dir -> Files.write(dir.resolve("d.csv"), new byte[0]),
            " is empty; a CSV file needs a header line and rows"),
        Arguments.of("a row with a cell too many", (DataCase) dir -> Files.writeString(dir.resolve("d.csv"),
            GOOD + "7,8,0,9\n"), " row 4 does not have the header's 3 columns: '7,8,0,9'"),
        Arguments.of("a row with a cell too few", (DataCase) dir -> Files.writeString(dir.resolve("d.csv"),
            "p0,p1,label\n1,2,0\n3,4\n"), " row 2 does not have the header's 3 columns: '3,4'"),
        Arguments.of("a CSV named .parquet", (DataCase) dir -> Files.writeString(dir.resolve("d.parquet"), GOOD),
            " is not a Parquet file (30 bytes, without Parquet's PAR1 marks at its start and end: truncated, or another"
                + " format); give a Parquet file, or a CSV file whose name does not end in .parquet"),
        Arguments.of("a truncated Parquet file", (DataCase) dir -> {
          Path written = parquet(dir.resolve("whole.parquet"));
          byte[] bytes = Files.readAllBytes(written);
          return Files.write(dir.resolve("d.parquet"), java.util.Arrays.copyOf(bytes, bytes.length / 2));
        }, " is not a Parquet file ("),
        Arguments.of("a Parquet file with a corrupt footer", (DataCase) dir -> Files.write(dir.resolve("d.parquet"),
            "PAR1 rows that are not Parquet PAR1".getBytes(StandardCharsets.US_ASCII)),
            " is not a readable Parquet file: its footer is corrupt ("),
        Arguments.of("a directory without data files", (DataCase) dir -> {
          Path d = Files.createDirectories(dir.resolve("d.parquet"));
          Files.writeString(d.resolve("_SUCCESS"), "");
          return d;
        }, " is a directory without data files"));
  }

  interface DataCase {
    Path write(Path dir) throws Exception;
  }

  /** A Parquet file of {@link #GOOD}'s rows, written by Spark (a directory of parts): its one part. */
  private static Path parquet(Path dir) throws Exception {
    Path csv = Files.writeString(Files.createTempFile("good", ".csv"), GOOD);
    spark.read().option("header", "true").option("inferSchema", "true").csv(csv.toString()).coalesce(1)
        .write().parquet(dir.toString());
    Files.delete(csv);
    try (Stream<Path> parts = Files.list(dir)) {
      return parts.filter(p -> p.getFileName().toString().endsWith(".parquet")).findFirst().orElseThrow();
    }
  }

  @ParameterizedTest(name = "{0}")
  @MethodSource("badFiles")
  void aDataFileThatIsNotWhatItsNameSaysIsOneLineExitOneForTheDemoAndSparkRun(String name, DataCase bad, String line,
      @TempDir Path tmp) throws Exception {
    Path data = bad.write(tmp);
    Path out = tmp.resolve("out");
    Outcome demo = demo("--data", data.toString(), "--out", out.toString(), "--workers", "2", "--epochs", "1");
    ByteArrayOutputStream stdout = new ByteArrayOutputStream();
    ByteArrayOutputStream stderr = new ByteArrayOutputStream();
    int code = SparkRun.run(new String[] {"--data", data.toString(), "--workers", "2", "--", "true"},
        new PrintStream(stdout, true), new PrintStream(stderr, true), trainer -> spark);
    Outcome sparkRun = new Outcome(code, stdout.toString(StandardCharsets.UTF_8), stderr.toString(StandardCharsets.UTF_8));
    for (Map.Entry<String, Outcome> run : Map.of("demo", demo, "spark-run", sparkRun).entrySet()) {
      Outcome o = run.getValue();
      assertEquals(1, o.code(), o.err());
      assertTrue(o.err().startsWith("muster " + run.getKey() + ": " + data + line), o.err());
      assertEquals(1, o.err().lines().count(), o.err());
      assertEquals("", o.out());
    }
    try (Stream<Path> files = Files.list(out)) {
      assertEquals(List.of(), files.toList(), "nothing trained, nothing written");
    }
  }

  @Test
  void aDivergingRunStopsAtTheStepWhoseLossIsNotFiniteAndFails(@TempDir Path tmp) {
    Outcome o = demo("--out", tmp.resolve("out").toString(), "--workers", "2", "--epochs", "10", "--learning-rate",
        "1e38");
    assertEquals(1, o.code(), o.err());
    assertTrue(o.err().matches("muster demo: training failed on attempt 1 of 2, not re-run \\(.*\\): worker \\d on \\S+ "
        + "\\(executor driver\\) failed: java.lang.IllegalStateException: the loss is (NaN|Infinity) at epoch \\d+ step \\d+: training diverged; give "
        + "a smaller --learning-rate, or check the data for extreme values\n"), o.err());
    assertEquals("", o.out(), "no accuracy is reported");
  }

  @Test
  void sparkRunRefusesFewerRowsThanTasksThatReadThem(@TempDir Path tmp) throws Exception {
    Path data = Files.writeString(tmp.resolve("d.csv"), GOOD);
    ByteArrayOutputStream stderr = new ByteArrayOutputStream();
    int code = SparkRun.run(new String[] {"--data", data.toString(), "--workers", "4", "--", "true"},
        new PrintStream(new ByteArrayOutputStream(), true), new PrintStream(stderr, true), trainer -> spark);
    assertEquals(1, code, stderr.toString());
    assertEquals("muster spark-run: " + data + " has 3 rows, fewer than the 4 tasks that each read a shard of it;"
        + " give more rows or fewer --workers\n", stderr.toString());
  }

  @Test
  void anOutputDirectoryThatTakesNoFileIsRefusedBeforeTheDataIsRead(@TempDir Path tmp) throws Exception {
    Path data = Files.writeString(tmp.resolve("data.csv"), rows(0, ""));
    long jobs = spark.sparkContext().statusTracker().getJobIdsForGroup(null).length;
    Outcome o = demo("--data", data.toString(), "--out", "/proc/forbidden", "--workers", "2", "--global-batch", "8");
    assertEquals(1, o.code(), o.err());
    assertEquals("muster demo: --out file:/proc/forbidden is not writable: cannot create the directory\n", o.err());
    assertEquals(jobs, spark.sparkContext().statusTracker().getJobIdsForGroup(null).length, "no Spark job ran");
  }

  @Test
  void dropNullsSkipsRowsWithAnEmptyCellAndSaysHowMany(@TempDir Path tmp) throws Exception {
    Path data = Files.writeString(tmp.resolve("data.csv"), rows(5, "1.5,,1"));
    Outcome o = demo("--data", data.toString(), "--out", tmp.resolve("out").toString(), "--workers", "2",
        "--epochs", "1", "--global-batch", "8", "--drop-nulls");
    assertEquals(0, o.code(), o.err());
    assertTrue(o.out().startsWith("skipped 1 row with an empty cell (--drop-nulls)\nheld-out accuracy "), o.out());
    assertTrue(o.out().contains(" rows of 3 classes; checkpoints in "), o.out());
  }
}
