package io.muster.yarn;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.FileAlreadyExistsException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.BasicFileAttributes;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HexFormat;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;
import io.muster.internal.FileTrees;
import org.apache.hadoop.conf.Configuration;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * A class-data sharing archive of what a {@link TaskExecutor} loads, so that its JVM maps the
 * classes, parsed and verified already, instead of reading them out of the jars: an executor
 * starts on about two thirds of the CPU time. Made once per runtime by the client, from one
 * executor's run against a master in the same JVM ({@link TaskExecutor#WARM_UP}), and kept in the
 * client's cache in a directory named by what the JVM checks the archive against: this JVM, the
 * executor's flags, and every class-path jar's path, size and modification time (where one
 * differs, the JVM maps nothing). A class directory cannot be archived from: it is named by its
 * files' paths, sizes and times, and packed into a jar in that directory when the archive is made,
 * so that a submission that finds the archive only reads file attributes.
 *
 * <p>For a runtime used where it is (every NodeManager sees the client's paths). A staged runtime
 * is localized into each container anew, with new modification times, and starts without one.
 * Where a node's JVM is another than the client's, the archive does not load and the executor
 * starts as it would without it (the JVM's complaint is silenced).
 */
final class ExecutorArchive {

  private static final Logger log = LoggerFactory.getLogger(ExecutorArchive.class);
  /**
   * A small, short-lived JVM: the C1 compiler and the serial collector start it fastest, and
   * {@link ContainerLogging} starts Log4j.
   */
  static final List<String> JVM_FLAGS = containerFlags("-Xmx128m");
  /** The master's: it lives as long as the job, but its work is small and its start is on every job's path. */
  static final List<String> MASTER_JVM_FLAGS = containerFlags("-Xmx256m");
  /** The master's environment variable that names the archive for the executors it launches. */
  static final String ENV = "MUSTER_EXECUTOR_ARCHIVE";
  private static final Duration MAKING_TIMEOUT = Duration.ofMinutes(2);
  /** How many runtimes' archives the cache keeps (about 30 MB each): those made last. */
  private static final int KEPT = 4;
  private static final String ARCHIVE = "executor.jsa";

  /** The runtime as the executors get it, and the archive made for it, if one could be. */
  record Prepared(List<String> classpath, Optional<Path> archive) {}

  private ExecutorArchive() {}

  private static List<String> containerFlags(String heap) {
    List<String> flags = new ArrayList<>(List.of(heap, "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC"));
    flags.addAll(ContainerLogging.JVM_FLAGS);
    return List.copyOf(flags);
  }

  /** The JVM options that map the archive, silent where it does not fit the node's JVM. */
  static String jvmOptions(String archive) {
    return "-XX:SharedArchiveFile=" + archive + " -Xlog:cds=off,cds+dynamic=off";
  }

  /** The client's cache: {@code $XDG_CACHE_HOME/muster/yarn-executor}, else under {@code ~/.cache}. */
  static Path defaultCache() {
    String xdg = System.getenv("XDG_CACHE_HOME");
    Path base = xdg == null || xdg.isBlank() ? Path.of(System.getProperty("user.home"), ".cache") : Path.of(xdg);
    return base.resolve("muster").resolve("yarn-executor");
  }

  /**
   * The job's class path, its directories packed into jars, and the archive for it, made now
   * unless the cache has it. Where it cannot be made, the class path as given and no archive: the
   * executors then start as they always did.
   */
  static Prepared prepare(Configuration conf, List<String> classpath, Path cache) {
    if (!conf.getBoolean(MusterClient.EXECUTOR_ARCHIVE, true)) {
      return new Prepared(classpath, Optional.empty());
    }
    try {
      List<String> facts = new ArrayList<>(List.of(System.getProperty("java.home"),
          System.getProperty("java.vm.version")));
      facts.addAll(JVM_FLAGS);
      List<Path> entries = new ArrayList<>();
      for (String entry : classpath) {
        Path local = Path.of(entry).toAbsolutePath();
        if (entry.isBlank() || !Files.exists(local)) {
          continue; // the JVM skips what is not there
        }
        facts.addAll(Files.isDirectory(local) ? filesOf(local) : List.of(fileFact(local)));
        entries.add(local);
      }
      Path home = cache.resolve(sha256(String.join("\n", facts)).substring(0, 16));
      List<String> jars = new ArrayList<>();
      Map<Path, Path> toPack = new LinkedHashMap<>(); // a class directory's jar in home → the directory
      for (Path local : entries) {
        Path jar = local;
        if (Files.isDirectory(local)) {
          jar = home.resolve(jars.size() + "-" + local.getFileName() + ".jar");
          toPack.put(jar, local);
        }
        jars.add(jar.toString());
      }
      Path archive = home.resolve(ARCHIVE);
      if (!Files.exists(archive) && !make(home, toPack, jars)) {
        return new Prepared(classpath, Optional.empty());
      }
      return new Prepared(jars, Optional.of(archive));
    } catch (IOException | RuntimeException e) {
      log.warn("the executors start without a class-data archive: {}", e.getMessage());
      log.debug("why", e);
      return new Prepared(classpath, Optional.empty());
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      return new Prepared(classpath, Optional.empty());
    }
  }

  /** A class directory as its files' names, sizes and times: a change to any makes another runtime. */
  private static List<String> filesOf(Path dir) throws IOException {
    try (Stream<Path> files = Files.walk(dir)) {
      List<String> facts = new ArrayList<>();
      for (Path file : files.filter(Files::isRegularFile).sorted().toList()) {
        facts.add(fileFact(file));
      }
      return facts;
    }
  }

  private static String fileFact(Path file) throws IOException {
    BasicFileAttributes attributes = Files.readAttributes(file, BasicFileAttributes.class);
    return file + " " + attributes.size() + " " + attributes.lastModifiedTime().toMillis();
  }

  /**
   * Makes the archive in its own directory, beside the jars packed for it. The client that creates
   * the directory makes it; false where another client is at it (this job goes without).
   */
  private static boolean make(Path home, Map<Path, Path> toPack, List<String> jars)
      throws IOException, InterruptedException {
    Files.createDirectories(home.getParent());
    if (Files.isDirectory(home)
        && Files.getLastModifiedTime(home).toInstant().isBefore(Instant.now().minus(MAKING_TIMEOUT.multipliedBy(2)))) {
      FileTrees.delete(home); // never finished: its maker died
    }
    try {
      Files.createDirectory(home);
    } catch (FileAlreadyExistsException e) {
      log.info("another client is making the executors' class-data archive in {}; this job's executors start "
          + "without it", home);
      return false;
    }
    boolean made = false;
    try {
      for (Map.Entry<Path, Path> jar : toPack.entrySet()) {
        Path packed = RuntimeStaging.packed(jar.getValue());
        try {
          Files.move(packed, jar.getKey());
        } finally {
          deleteQuietly(packed);
        }
      }
      warmUp(jars, home);
      made = true;
    } finally {
      if (!made) {
        FileTrees.delete(home);
      }
    }
    try (Stream<Path> archives = Files.list(home.getParent())) {
      for (Path old : archives.filter(Files::isDirectory).sorted(Comparator.comparing(ExecutorArchive::modified)
          .reversed()).skip(KEPT).toList()) {
        FileTrees.delete(old); // a JVM that maps its archive keeps it until it exits
      }
    }
    return true;
  }

  /** One executor's run in a JVM that writes what it loaded to the archive as it exits. */
  private static void warmUp(List<String> jars, Path home) throws IOException, InterruptedException {
    Path archive = home.resolve(ARCHIVE);
    Path partial = home.resolve(ARCHIVE + ".partial");
    Path work = Files.createDirectory(home.resolve("warm-up"));
    Path output = home.resolve("warm-up.log");
    long started = System.nanoTime();
    try {
      List<String> command = new ArrayList<>(List.of(Path.of(System.getProperty("java.home"), "bin", "java")
          .toString()));
      command.addAll(JVM_FLAGS);
      command.addAll(List.of("-XX:ArchiveClassesAtExit=" + partial, "-cp", String.join(":", jars),
          ApplicationMaster.class.getName(), TaskExecutor.WARM_UP));
      Process process = new ProcessBuilder(command).directory(work.toFile()).redirectErrorStream(true)
          .redirectOutput(output.toFile()).start();
      if (!process.waitFor(MAKING_TIMEOUT.toMillis(), TimeUnit.MILLISECONDS)) {
        process.destroyForcibly();
        throw new IOException("the executor's warm-up run did not end within " + MAKING_TIMEOUT.toSeconds() + " s");
      }
      if (process.exitValue() != 0 || !Files.exists(partial)) {
        List<String> lines = Files.readAllLines(output);
        throw new IOException("the executor's warm-up run exited with " + process.exitValue() + ": "
            + String.join(" | ", lines.subList(Math.max(0, lines.size() - 5), lines.size())));
      }
      Files.move(partial, archive); // only a whole archive is ever found
      log.info("made a class-data archive for the executors in {} ms ({} MiB): {}",
          TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - started), Files.size(archive) >> 20, archive);
    } finally {
      FileTrees.delete(work);
      deleteQuietly(output);
    }
  }

  private static String sha256(String text) throws IOException {
    try {
      return HexFormat.of().formatHex(MessageDigest.getInstance("SHA-256").digest(text.getBytes(StandardCharsets.UTF_8)));
    } catch (NoSuchAlgorithmException e) {
      throw new IOException("SHA-256 is missing from this JVM", e);
    }
  }

  private static void deleteQuietly(Path file) {
    try {
      Files.deleteIfExists(file);
    } catch (IOException e) {
      log.debug("cannot delete {}: {}", file, e.toString());
    }
  }

  private static long modified(Path file) {
    try {
      return Files.getLastModifiedTime(file).toMillis();
    } catch (IOException e) {
      return 0; // gone meanwhile: first to go
    }
  }
}
