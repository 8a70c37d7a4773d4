package io.muster.examples;

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

/**
 * A command's main as a user runs it: a child JVM with the command line's log configuration (not
 * the tests'), stderr read apart from stdout, its environment the test's.
 */
final class MainProcess {

  record Run(int code, List<String> out, List<String> err) {}

  private MainProcess() {}

  static Run run(Class<?> main, Map<String, String> env, Path dir, String... args) throws Exception {
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
}
