package io.muster.examples;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The console of {@code ./muster demo} and {@code spark-run} as a user sees it: the commands' own
 * main in a child JVM with the command line's log configuration (not the tests'), stderr read
 * apart from stdout. By default a failed gang attempt is one line and there are no stack traces;
 * {@code MUSTER_LOG_LEVEL=debug} brings them back.
 */
class QuietConsoleTest {

  private static final String TIME = "\\d\\d:\\d\\d:\\d\\d\\.\\d{3} ";

  @Test
  void aFailedSparkRunIsItsTasksStartLinesAndOneLineNamingTheFailure(@TempDir Path tmp) throws Exception {
    MainProcess.Run quiet = MainProcess.run(SparkRun.class, Map.of(), Files.createDirectories(tmp.resolve("quiet")),
        "--workers", "2", "--", "false");
    assertEquals(1, quiet.code(), String.join("\n", quiet.err()));
    assertEquals(3, quiet.err().size(), String.join("\n", quiet.err()));
    assertTrue(quiet.err().subList(0, 2).stream().allMatch(l -> l.matches(TIME + "INFO  worker [01]: starting `false` "
        + "\\(attempt 1\\)")), String.join("\n", quiet.err()));
    assertTrue(quiet.err().get(2).matches("muster spark-run: training failed on attempt 1 of 1: worker [01] on \\S+ "
        + "\\(executor driver\\) exited with code 1; it wrote nothing to stderr"), quiet.err().get(2));

    MainProcess.Run debug = MainProcess.run(SparkRun.class, Map.of("MUSTER_LOG_LEVEL", "debug"),
        Files.createDirectories(tmp.resolve("debug")), "--workers", "2", "--", "false");
    assertEquals(1, debug.code());
    assertTrue(debug.err().stream().anyMatch(l -> l.startsWith("\tat io.muster.spark.")), "stack traces in debug");
    assertTrue(debug.err().stream().anyMatch(l -> l.contains("Lost task")), "Spark's report of each task in debug");
  }

  @Test
  void aDemoThatCrashesOnceSaysSoInOneLineAndResumes(@TempDir Path tmp) throws Exception {
    MainProcess.Run run = MainProcess.run(SparkDemo.class, Map.of(), tmp, "--workers", "2", "--epochs", "3",
        "--crash-once-at-epoch", "2", "--out", tmp.resolve("out").toString());
    String err = String.join("\n", run.err());
    assertEquals(0, run.code(), err);
    List<String> notEpochs = run.err().stream().filter(l -> !l.matches(TIME + "INFO  epoch \\d/3: .*")).toList();
    assertEquals(List.of("WARN  attempt 1 of 2 failed: worker 1 on 127.0.0.1 (executor driver) failed: "
        + "io.muster.spark.RetryableException: --crash-once-at-epoch 2: worker 1 crashes in epoch 2 of the first run, as "
        + "asked; re-running the gang", "INFO  succeeded on attempt 2 of 2"),
        notEpochs.stream().map(l -> l.replaceFirst(TIME, "")).toList(), err);
    assertEquals(3, run.err().size() - notEpochs.size(), "epochs 1, 2 (again after the crash, it resumes at 2) and 3: " + err);
    assertEquals("the gang ran 2 times; the last run resumed from the backup at epoch 2", run.out().get(0));
  }
}
