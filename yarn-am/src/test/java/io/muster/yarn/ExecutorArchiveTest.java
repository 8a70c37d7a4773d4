package io.muster.yarn;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.FileTime;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;
import org.apache.hadoop.conf.Configuration;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The executors' class-data archive, made by a real warm-up run and mapped by a real JVM: made once
 * per runtime, a new one when a class directory changes, the cache kept to the newest, and an
 * archive that does not fit ignored in silence.
 */
class ExecutorArchiveTest {

  private static final List<String> CLASSPATH = List.of(System.getProperty("java.class.path").split(":"));

  @Test
  void anExecutorMapsTheArchiveMadeOnceForItsRuntime(@TempDir Path cache, @TempDir Path work) throws Exception {
    Path classes = Files.createDirectories(work.resolve("extra-classes"));
    Files.writeString(classes.resolve("one.txt"), "1");
    List<String> classpath = new ArrayList<>(CLASSPATH);
    classpath.add(classes.toString());
    for (int i = 0; i < 5; i++) { // archives of earlier runtimes, oldest first
      Path old = Files.createDirectories(cache.resolve("old" + i));
      Files.setLastModifiedTime(old, FileTime.from(Instant.now().minusSeconds(3600 - i)));
    }

    ExecutorArchive.Prepared first = ExecutorArchive.prepare(new Configuration(false), classpath, cache);

    Path archive = first.archive().orElseThrow();
    assertTrue(Files.size(archive) > 1 << 20, "an archive of the executor's classes: " + Files.size(archive));
    assertTrue(first.classpath().stream().map(Path::of).noneMatch(Files::isDirectory), first.classpath().toString());
    assertTrue(first.classpath().stream().filter(e -> e.endsWith("-extra-classes.jar"))
        .allMatch(e -> Path.of(e).getParent().equals(archive.getParent())), first.classpath().toString());
    try (Stream<Path> kept = Files.list(cache)) {
      assertEquals(java.util.Set.of("old2", "old3", "old4", archive.getParent().getFileName().toString()),
          kept.map(p -> p.getFileName().toString()).collect(java.util.stream.Collectors.toSet()), "the newest four");
    }
    String log = runWarmUp(first, work);
    assertTrue(log.contains(TaskExecutor.class.getName() + " source: shared objects file (top)"),
        "the executor's classes come from the archive");
    assertTrue(log.contains(ApplicationMaster.class.getName() + " source: shared objects file (top)"),
        "and so do the master's");
    for (String record : List.of("AllocateRequestPBImpl", "StartContainersRequestPBImpl")) {
      assertTrue(log.contains("org.apache.hadoop.yarn.api.protocolrecords.impl.pb." + record
          + " source: shared objects file (top)"), "what the master asks for and launches with: " + record);
    }
    assertTrue(log.contains(ContainerLogging.Containers.class.getName() + " source: shared objects file (top)"),
        "their logging is configured in code, from the archive too");
    assertFalse(log.contains("org.apache.logging.log4j.core.config.xml.XmlConfiguration "), "no file is parsed");

    FileTime made = Files.getLastModifiedTime(archive);
    ExecutorArchive.Prepared again = ExecutorArchive.prepare(new Configuration(false), classpath, cache);
    assertEquals(first, again);
    assertEquals(made, Files.getLastModifiedTime(archive), "made once");

    Files.writeString(classes.resolve("two.txt"), "2");
    ExecutorArchive.Prepared changed = ExecutorArchive.prepare(new Configuration(false), classpath, cache);
    assertNotEquals(archive, changed.archive().orElseThrow(), "a changed class directory is another runtime");
    assertTrue(Files.exists(archive), "the earlier runtime's archive is kept");
  }

  @Test
  void turnedOffTheExecutorsGetTheClasspathAsGiven(@TempDir Path cache) throws IOException {
    Configuration conf = new Configuration(false);
    conf.setBoolean(MusterClient.EXECUTOR_ARCHIVE, false);

    ExecutorArchive.Prepared prepared = ExecutorArchive.prepare(conf, CLASSPATH, cache);

    assertEquals(new ExecutorArchive.Prepared(CLASSPATH, Optional.empty()), prepared);
    try (Stream<Path> made = Files.list(cache)) {
      assertEquals(0, made.count());
    }
  }

  @Test
  void anArchiveThatDoesNotFitIsIgnoredInSilence(@TempDir Path work) throws Exception {
    Path corrupt = Files.write(work.resolve("corrupt.jsa"), new byte[] {1, 2, 3, 4, 5, 6, 7, 8});
    for (Path archive : List.of(corrupt, work.resolve("missing.jsa"))) {
      List<String> command = new ArrayList<>(List.of(java()));
      command.addAll(List.of(ExecutorArchive.jvmOptions(archive.toString()).split(" ")));
      command.add("-version");
      String output = run(command, work);
      assertFalse(output.contains("archive") || output.contains("cds") || output.contains("CDS"), output);
    }
  }

  /**
   * The master's and an executor's warm-up run with the archive, in a JVM started as the client
   * starts the master; its class-loading log.
   */
  private static String runWarmUp(ExecutorArchive.Prepared prepared, Path work) throws Exception {
    Path log = work.resolve("class-load.log");
    List<String> command = new ArrayList<>(List.of(java()));
    command.addAll(ExecutorArchive.MASTER_JVM_FLAGS);
    command.addAll(List.of(ExecutorArchive.jvmOptions(prepared.archive().orElseThrow().toString()).split(" ")));
    command.addAll(List.of("-Xlog:class+load:file=" + log, "-cp", String.join(":", prepared.classpath()),
        ApplicationMaster.class.getName(), TaskExecutor.WARM_UP));
    String output = run(command, work);
    assertTrue(output.contains("worker 0: the command exited with code 0"), output);
    return Files.readString(log);
  }

  /** Runs the command in {@code work} within a minute; its output, once it has exited 0. */
  private static String run(List<String> command, Path work) throws Exception {
    Path output = Files.createTempFile(work, "output", ".txt");
    Process process = new ProcessBuilder(command).directory(work.toFile()).redirectErrorStream(true)
        .redirectOutput(output.toFile()).start();
    if (!process.waitFor(60, TimeUnit.SECONDS)) {
      process.destroyForcibly();
      throw new AssertionError(command + " did not exit within 60 s: " + Files.readString(output));
    }
    String text = Files.readString(output);
    assertEquals(0, process.exitValue(), text);
    return text;
  }

  private static String java() {
    return Path.of(System.getProperty("java.home"), "bin", "java").toString();
  }
}
