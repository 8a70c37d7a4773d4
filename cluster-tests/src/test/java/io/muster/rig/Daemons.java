package io.muster.rig;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.stream.Collectors;

/** What the rig's daemons share: their JVM command line, log configuration and Hadoop-style XML files. */
final class Daemons {
  private Daemons() {}

  /** A small, quick-starting JVM: the daemons are many and the machine has two cores. */
  static List<String> java(Path log4j, List<Path> classpath, List<String> flags, String main, List<String> args) {
    List<String> command = new ArrayList<>(List.of(Installed.java(), "-Xmx256m", "-XX:+UseSerialGC",
        "-XX:TieredStopAtLevel=1", "-Dlog4j2.configurationFile=" + log4j));
    command.addAll(flags);
    command.addAll(List.of("-cp", Installed.joined(classpath), main));
    command.addAll(args);
    return command;
  }

  /** A Log4j 2 configuration for the daemons: INFO, to stdout, which the rig keeps per host. */
  static Path log4j(Path dir) {
    return write(dir.resolve("log4j2-daemons.properties"), String.join("\n",
        "status = warn",
        "appender.out.type = Console",
        "appender.out.name = out",
        "appender.out.layout.type = PatternLayout",
        "appender.out.layout.pattern = %d{HH:mm:ss.SSS} %-5p %c{1}: %m%n",
        "rootLogger.level = info",
        "rootLogger.appenderRef.out.ref = out",
        ""));
  }

  /** A Hadoop configuration file ({@code core-site.xml}, …) with these properties. */
  static Path siteXml(Path file, Map<String, String> properties) {
    return write(file, "<?xml version=\"1.0\"?>\n<configuration>\n" + properties.entrySet().stream()
        .map(e -> "  <property><name>" + e.getKey() + "</name><value>" + e.getValue() + "</value></property>")
        .collect(Collectors.joining("\n")) + "\n</configuration>\n");
  }

  static Path write(Path file, String text) {
    try {
      Files.createDirectories(file.getParent());
      return Files.writeString(file, text);
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }
}
