package io.muster.testing;

import static org.junit.jupiter.api.Assumptions.abort;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Comparator;
import java.util.List;
import java.util.Optional;
import java.util.stream.Stream;
import java.util.concurrent.TimeUnit;

/**
 * Real TensorFlow for Python, for the tests that judge Muster against it: a virtual environment
 * with {@code tensorflow-cpu==2.21.0}, made once in {@code ~/.cache/muster} (outside the
 * repository) and reused. Where pip cannot get it, the calling test is skipped with the reason.
 */
public final class PythonTensorFlow {
  public static final String VERSION = "2.21.0";
  private static final Path HOME = Path.of(System.getProperty("user.home"), ".cache", "muster",
      "tensorflow-cpu-" + VERSION);
  private static final Path READY = HOME.resolve(".muster-ready");

  private PythonTensorFlow() {}

  /** The environment's {@code python}, provisioning it first if needed; aborts the test if it cannot. */
  public static synchronized Path python() {
    Path python = HOME.resolve("bin").resolve("python");
    if (Files.exists(READY) && run(List.of(python.toString(), "-c", "import tensorflow"), 120).isEmpty()) {
      return python;
    }
    try {
      Files.createDirectories(HOME.getParent());
      deleteRecursively(HOME);
    } catch (IOException e) {
      abort("cannot prepare " + HOME + " for TensorFlow: " + e.getMessage());
    }
    String failed = run(List.of("python3", "-m", "venv", HOME.toString()), 120)
        .or(() -> run(List.of(HOME.resolve("bin").resolve("pip").toString(), "install", "-q", "--retries", "0",
            "tensorflow-cpu==" + VERSION), 900))
        .or(() -> run(List.of(python.toString(), "-c", "import tensorflow"), 120))
        .orElse(null);
    if (failed != null) {
      abort("real TensorFlow for Python is not available here, so this test cannot run: " + failed);
    }
    try {
      Files.writeString(READY, VERSION);
    } catch (IOException e) {
      abort("cannot mark " + HOME + " ready: " + e.getMessage());
    }
    return python;
  }

  /** Copies the test resource {@code /name} (a script) into {@code dir}; the copy's path. */
  public static Path script(String name, Path dir) throws IOException {
    Path script = dir.resolve(name);
    try (var in = PythonTensorFlow.class.getResourceAsStream("/" + name)) {
      if (in == null) {
        throw new IOException("no test resource /" + name + " on the class path");
      }
      Files.copy(in, script);
    }
    return script;
  }

  private static void deleteRecursively(Path dir) throws IOException {
    if (!Files.exists(dir)) {
      return;
    }
    try (Stream<Path> paths = Files.walk(dir)) {
      for (Path p : paths.sorted(Comparator.reverseOrder()).toList()) {
        Files.delete(p);
      }
    }
  }

  /** Runs a command; empty when it exits 0, else what went wrong with the last line it printed. */
  private static Optional<String> run(List<String> command, int seconds) {
    try {
      Path log = Files.createTempFile("muster-tf-provision", ".log");
      try {
        Process p = new ProcessBuilder(command).redirectErrorStream(true).redirectOutput(log.toFile()).start();
        if (!p.waitFor(seconds, TimeUnit.SECONDS)) {
          p.destroyForcibly();
          return Optional.of("`" + String.join(" ", command) + "` took longer than " + seconds + " s");
        }
        if (p.exitValue() == 0) {
          return Optional.empty();
        }
        List<String> lines = Files.readAllLines(log);
        return Optional.of("`" + String.join(" ", command) + "` exited with " + p.exitValue()
            + (lines.isEmpty() ? "" : ": " + lines.get(lines.size() - 1)));
      } finally {
        Files.deleteIfExists(log);
      }
    } catch (IOException e) {
      return Optional.of("cannot run `" + String.join(" ", command) + "`: " + e.getMessage());
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      return Optional.of("interrupted");
    }
  }
}
