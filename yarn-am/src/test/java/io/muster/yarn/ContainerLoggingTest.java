package io.muster.yarn;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The containers' logging, in a JVM started with the containers' flags and this module's test
 * class path (whose {@code log4j2-test.xml} it must not take): the lines and levels of the command
 * line's {@code log4j2.xml}, set by the same environment variables.
 */
class ContainerLoggingTest {

  @Test
  void byDefaultMustersInfoLinesOnStderrWithoutStackTracesAndHadoopSilent(@TempDir Path work) throws Exception {
    String stderr = logInAContainerJvm(Map.of(), work);

    assertTrue(stderr.matches("(?s)\\d\\d:\\d\\d:\\d\\d\\.\\d{3} INFO  muster info\n.*"), stderr);
    assertFalse(stderr.contains("muster debug"), stderr);
    assertTrue(stderr.contains(" ERROR muster error\n"), stderr);
    assertFalse(stderr.contains("java.io.IOException: the cause"), "no stack trace below debug: " + stderr);
    assertFalse(stderr.contains("hadoop warn"), stderr);
    assertTrue(stderr.contains(" ERROR native code error\n"), stderr);
    assertTrue(stderr.contains(" WARN  other warn\n"), stderr);
    assertFalse(stderr.contains("other info"), stderr);
    assertFalse(stderr.contains("log4j2-test"), stderr);
  }

  @Test
  void debugBringsMustersDebugLinesAndStackTracesAndHadoopHasItsOwnLevel(@TempDir Path work) throws Exception {
    String stderr = logInAContainerJvm(Map.of("MUSTER_LOG_LEVEL", "debug", "MUSTER_HADOOP_LOG_LEVEL", "warn"), work);

    assertTrue(stderr.contains(" DEBUG muster debug\n"), stderr);
    assertTrue(stderr.contains(" ERROR muster error\njava.io.IOException: the cause"), stderr);
    assertTrue(stderr.contains(" WARN  hadoop warn\n"), stderr);
    assertFalse(stderr.contains("other info"), stderr);
  }

  /** What a container's JVM logs (see {@link Logs}), its environment {@code env} added to this one's. */
  private static String logInAContainerJvm(Map<String, String> env, Path work) throws Exception {
    List<String> command = new ArrayList<>(List.of(Path.of(System.getProperty("java.home"), "bin", "java").toString()));
    command.addAll(ContainerLogging.JVM_FLAGS);
    command.addAll(List.of("-cp", System.getProperty("java.class.path"), Logs.class.getName()));
    ProcessBuilder builder = new ProcessBuilder(command).directory(work.toFile())
        .redirectError(work.resolve("stderr").toFile()).redirectOutput(work.resolve("stdout").toFile());
    builder.environment().remove("MUSTER_LOG_LEVEL");
    builder.environment().remove("MUSTER_HADOOP_LOG_LEVEL");
    builder.environment().putAll(env);
    Process process = builder.start();
    if (!process.waitFor(60, TimeUnit.SECONDS)) {
      process.destroyForcibly();
      throw new AssertionError(command + " did not exit within 60 s");
    }
    String stderr = Files.readString(work.resolve("stderr"));
    assertEquals(0, process.exitValue(), stderr);
    return stderr;
  }

  /** A container JVM's main that logs a line at each level that matters. */
  public static final class Logs {
    public static void main(String[] args) {
      Logger muster = LoggerFactory.getLogger("io.muster.yarn.Somewhere");
      muster.info("muster info");
      muster.debug("muster debug");
      muster.error("muster error", new IOException("the cause"));
      LoggerFactory.getLogger("org.apache.hadoop.ipc.Client").warn("hadoop warn");
      LoggerFactory.getLogger("org.apache.hadoop.util.NativeCodeLoader").error("native code error");
      Logger other = LoggerFactory.getLogger("org.example.Other");
      other.warn("other warn");
      other.info("other info");
    }
  }
}
