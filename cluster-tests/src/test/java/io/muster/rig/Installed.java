package io.muster.rig;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.stream.Stream;

/**
 * The software every emulated host has, as a cluster's image would: the JDK, and the jars this build
 * made, found through the launcher class paths the examples' and the command line's builds write
 * ({@code target/classpath*.txt}).
 */
final class Installed {
  private Installed() {}

  static Path root() {
    return Path.of(System.getProperty("muster.root", "..")).toAbsolutePath().normalize();
  }

  static String java() {
    return Path.of(System.getProperty("java.home"), "bin", "java").toString();
  }

  /** Spark's JVM flags: the --add-opens and properties that Spark's launcher gives Spark 4 on Java 17. */
  static List<String> sparkJvmFlags() {
    String flags = System.getProperty("muster.spark.jvm.flags", "");
    return Arrays.stream(flags.trim().split("\\s+"))
        .filter(f -> f.startsWith("--add-opens") || f.startsWith("-Djdk.reflect") || f.startsWith("-Dio.netty")).toList();
  }

  /** Hadoop's daemons and client: the command line's class path (hadoop-client-minicluster, api, runtime). */
  static List<Path> hadoop() {
    return classpath("cli", "classpath.txt");
  }

  /** What a Spark distribution's {@code jars/} holds: Spark, its Hadoop client and Log4j. */
  static List<Path> spark() {
    List<Path> jars = new ArrayList<>(classpath("examples", "classpath-provided.txt"));
    // Maven counts slf4j-api as Muster's own dependency; Spark's distribution ships it too.
    classpath("examples", "classpath.txt").stream().filter(p -> p.getFileName().toString().startsWith("slf4j-api-"))
        .forEach(jars::add);
    return jars;
  }

  /** Muster's jars that travel with a Spark job ({@code --jars}): the examples' runtime class path. */
  static List<Path> musterJars() {
    return classpath("examples", "classpath.txt");
  }

  /** {@code examples/target/muster-examples-<version>.jar}. */
  static Path examplesJar() {
    return jar("examples", "muster-examples-");
  }

  /** The command line's jar and class path ({@code io.muster.cli.Muster}). */
  static List<Path> cli() {
    List<Path> cp = new ArrayList<>(List.of(jar("cli", "muster-cli-")));
    cp.addAll(hadoop());
    return cp;
  }

  /** The benchmarks' jar and class path ({@code io.muster.bench.*}). */
  static List<Path> bench() {
    List<Path> cp = new ArrayList<>(List.of(jar("bench", "muster-bench-")));
    cp.addAll(classpath("bench", "classpath.txt"));
    return cp;
  }

  static String joined(List<Path> classpath) {
    return String.join(":", classpath.stream().map(Path::toString).toList());
  }

  private static Path jar(String module, String prefix) {
    Path target = root().resolve(module).resolve("target");
    try (Stream<Path> files = Files.list(target)) {
      return files.filter(p -> p.getFileName().toString().startsWith(prefix) && p.toString().endsWith(".jar")
          && !p.toString().endsWith("-tests.jar") && !p.toString().endsWith("-sources.jar")).findFirst()
          .orElseThrow(() -> new IllegalStateException("no " + prefix + "*.jar in " + target
              + "; build it first (mvn -B -ntp -DskipTests package)"));
    } catch (IOException e) {
      throw new UncheckedIOException("cannot list " + target + "; build it first (mvn -B -ntp -DskipTests package)", e);
    }
  }

  private static List<Path> classpath(String module, String file) {
    Path path = root().resolve(module).resolve("target").resolve(file);
    try {
      return Arrays.stream(Files.readString(path).strip().split(":")).map(Path::of).toList();
    } catch (IOException e) {
      throw new UncheckedIOException("cannot read " + path + "; build " + module + " first (mvn -B -ntp -DskipTests "
          + "package)", e);
    }
  }
}
