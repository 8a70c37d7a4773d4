package io.muster.examples;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.File;
import java.io.IOException;
import java.lang.management.ManagementFactory;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The console of {@code ./muster demo} and {@code spark-run} as a user sees it: the commands' own
 * main in a child JVM with the command line's log configuration (not the tests'), stderr read
 * apart from stdout. By default a failed gang attempt is one line and there are no stack traces;
 * {@code MUSTER_LOG_LEVEL=debug} brings them back.
 */
class QuietConsoleTest {

  private record Run(int code, List<String> out, List<String> err) {}

  private static Run run(Class<?> main, Map<String, String> env, Path dir, String... args) throws Exception {
    List<String> command = new ArrayList<>(List.of(Path.of(System.getProperty("java.home"), "bin", "java").toString()));
    // Spark's JVM flags, as the tests' own JVM has them
    ManagementFactory.getRuntimeMXBean().getInputArguments().stream()
        .filter(a -> a.startsWith("--add-opens") || a.startsWith("-Djdk.reflect") || a.startsWith("-Dio.netty"))
        .forEach(command::add);
    command.addAll(List.of("-Xmx1g", "-XX:+UseSerialGC",
        "-Dlog4j2.configurationFile=" + Path.of(SparkRun.class.getResource("/log4j2.xml").toURI()),
        "-cp", System.getProperty("java.class.path"), main.getName()));
    command.addAll(List.of(args));
    File out = dir.resolve("stdout").toFile();
    File err = dir.resolve("stderr").toFile();
    ProcessBuilder builder = new ProcessBuilder(command).redirectOutput(out).redirectError(err).directory(dir.toFile());
    builder.environment().put("SPARK_LOCAL_IP", "127.0.0.1");
    builder.environment().remove("MUSTER_LOG_LEVEL");
    builder.environment().putAll(env);
    Process process = builder.start();
    try {
      if (!process.waitFor(4, TimeUnit.MINUTES)) {
        throw new AssertionError(main.getSimpleName() + " still running after 4 minutes; stderr:\n" + read(err));
      }
      return new Run(process.exitValue(), read(out).lines().toList(), read(err).lines().toList());
    } finally {
      process.destroyForcibly();
    }
  }

  private static String read(File file) throws IOException {
    return Files.readString(file.toPath(), StandardCharsets.UTF_8);
  }

  private static final String TIME = "\\d\\d:\\d\\d:\\d\\d\\.\\d{3} ";

  @Test
  void aFailedSparkRunIsItsTasksStartLinesAndOneLineNamingTheFailure(@TempDir Path tmp) throws Exception {
    Run quiet = run(SparkRun.class, Map.of(), Files.createDirectories(tmp.resolve("quiet")), "--workers", "2", "--",
        "false");
    assertEquals(1, quiet.code(), String.join("\n", quiet.err()));
    assertEquals(3, quiet.err().size(), String.join("\n", quiet.err()));
    assertTrue(quiet.err().subList(0, 2).stream().allMatch(l -> l.matches(TIME + "INFO  worker [01]: starting `false` "
        + "\\(attempt 1\\)")), String.join("\n", quiet.err()));
    assertTrue(quiet.err().get(2).matches("muster spark-run: training failed on attempt 1 of 1: worker [01]: `false` "
        + "exited with code 1; it wrote nothing to stderr"), quiet.err().get(2));

    Run debug = run(SparkRun.class, Map.of("MUSTER_LOG_LEVEL", "debug"), Files.createDirectories(tmp.resolve("debug")),
        "--workers", "2", "--", "false");
    assertEquals(1, debug.code());
    assertTrue(debug.err().stream().anyMatch(l -> l.startsWith("\tat io.muster.spark.")), "stack traces in debug");
    assertTrue(debug.err().stream().anyMatch(l -> l.contains("Lost task")), "Spark's report of each task in debug");
  }

  @Test
  void aDemoThatCrashesOnceSaysSoInOneLineAndResumes(@TempDir Path tmp) throws Exception {
    Run run = run(SparkDemo.class, Map.of(), tmp, "--workers", "2", "--epochs", "3", "--crash-once-at-epoch", "2",
        "--out", tmp.resolve("out").toString());
    String err = String.join("\n", run.err());
    assertEquals(0, run.code(), err);
    List<String> notEpochs = run.err().stream().filter(l -> !l.matches(TIME + "INFO  epoch \\d/3: .*")).toList();
    assertEquals(List.of("WARN  attempt 1 of 2 failed: worker 1: RetryableException: --crash-once-at-epoch 2: worker 1 "
        + "crashes in epoch 2 of the first run, as asked; re-running the gang", "INFO  succeeded on attempt 2 of 2"),
        notEpochs.stream().map(l -> l.replaceFirst(TIME, "")).toList(), err);
    assertEquals(3, run.err().size() - notEpochs.size(), "epochs 1, 2 (again after the crash, it resumes at 2) and 3: " + err);
    assertEquals("the gang ran 2 times; the last run resumed from the backup at epoch 2", run.out().get(0));
  }
}
