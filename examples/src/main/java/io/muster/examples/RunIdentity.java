package io.muster.examples;

import io.muster.checkpoint.BackupAndRestore;
import io.muster.checkpoint.CheckpointManager;
import io.muster.checkpoint.CheckpointMismatchException;
import io.muster.checkpoint.Tensor;
import io.muster.checkpoint.WritePolicy;
import java.io.FileNotFoundException;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.nio.charset.StandardCharsets;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;

/**
 * What a demo run's outputs belong to, kept in {@code <out>/muster-run.properties}: the data (a
 * file's URI, size and modification time, or the generator), the feature columns, the number of
 * classes and the seed (which picks the held-out rows). A run with the same identity is the same
 * run: it resumes from its backup. Any other run refuses the directory unless {@code --overwrite},
 * which deletes the outputs ({@code ckpt}, {@code backup}, {@code logs}) first. The number of
 * workers, the batch, the learning rate and the epochs are not part of it: a run may continue with
 * other ones.
 */
record RunIdentity(String data, List<String> features, int classes, long seed) {

  static final String FILE = "muster-run.properties";
  private static final List<String> OUTPUTS = List.of("ckpt", "backup", "logs");

  /** Refused: {@code --out} holds outputs that this run must not resume or mix with. */
  static final class OutputsInUseException extends IllegalStateException {
    OutputsInUseException(String message) {
      super(message);
    }
  }

  RunIdentity {
    features = List.copyOf(features);
  }

  /** A data file's (or Parquet directory's) URI, size and modification time. */
  static String ofFile(String data, Configuration hadoop) throws IOException {
    Path path = new Path(SparkDemo.outputUri(data));
    FileSystem fs = path.getFileSystem(hadoop);
    FileStatus status = fs.getFileStatus(path);
    long bytes = status.isDirectory() ? fs.getContentSummary(path).getLength() : status.getLen();
    return fs.makeQualified(path) + " (" + bytes + " bytes, modified "
        + Instant.ofEpochMilli(status.getModificationTime()) + ")";
  }

  /**
   * Makes {@code out} this run's: writes the identity file when there is none (or with
   * {@code overwrite}, after deleting the outputs), and checks the backup there, if any, against
   * the model's variables and the run's epochs.
   *
   * @throws OutputsInUseException saying what differs and what to do
   */
  void claim(FileSystem fs, Path out, boolean overwrite, int epochs, Map<String, Tensor> variables)
      throws IOException {
    if (overwrite) {
      for (String output : OUTPUTS) {
        fs.delete(new Path(out, output), true);
      }
      fs.delete(new Path(out, FILE), false);
    }
    Optional<RunIdentity> saved = read(fs, out);
    if (saved.isPresent() && !saved.get().equals(this)) {
      throw refused(out, "the outputs of another run: " + String.join("; ", differences(saved.get())));
    }
    List<String> present = OUTPUTS.stream().filter(o -> exists(fs, new Path(out, o))).toList();
    if (saved.isEmpty() && !present.isEmpty()) {
      throw refused(out, "outputs (" + String.join(", ", present) + ") that do not say which run they belong to");
    }
    Path backupDir = new Path(out, "backup");
    Path ckpt = new Path(out, "ckpt");
    boolean backedUp = CheckpointManager.latestCheckpoint(fs, new Path(backupDir, "chief")).isPresent();
    Optional<Path> checkpoint = CheckpointManager.latestCheckpoint(fs, ckpt);
    if (!backedUp && checkpoint.isPresent()) {
      throw refused(out, "a finished run of this job (its latest checkpoint " + checkpoint.get().getName()
          + ", and no backup left to resume from)");
    }
    if (backedUp) {
      // read as a non-chief task reads it, which writes nothing
      try (BackupAndRestore backup = new BackupAndRestore(fs, backupDir, new WritePolicy(false, 1),
          BackupAndRestore.EVERY_EPOCH)) {
        backup.restore(epochs, 1, variables);
      } catch (CheckpointMismatchException e) {
        throw new OutputsInUseException(e.getMessage() + "; give more --epochs to continue that run, --out a new "
            + "directory, or --overwrite to replace it");
      }
    }
    if (saved.isEmpty()) {
      write(fs, out);
    }
  }

  private static OutputsInUseException refused(Path out, String what) {
    return new OutputsInUseException("--out " + out + " holds " + what + "; give --out a new directory, or "
        + "--overwrite to replace them");
  }

  /** Each way in which {@code saved} (there) differs from this run (here). */
  List<String> differences(RunIdentity saved) {
    List<String> differences = new ArrayList<>();
    if (!saved.data.equals(data)) {
      differences.add("data " + saved.data + " there, " + data + " here");
    }
    if (saved.features.size() != features.size()) {
      differences.add(saved.features.size() + " features there, " + features.size() + " here");
    } else if (!saved.features.equals(features)) {
      differences.add("feature columns " + brief(saved.features) + " there, " + brief(features) + " here");
    }
    if (saved.classes != classes) {
      differences.add(saved.classes + " classes there, " + classes + " here");
    }
    if (saved.seed != seed) {
      differences.add("--seed " + saved.seed + " there, " + seed + " here");
    }
    return differences;
  }

  private static String brief(List<String> names) {
    return names.size() <= 4 ? String.join(", ", names) : String.join(", ", names.subList(0, 3)) + ", …";
  }

  private static boolean exists(FileSystem fs, Path path) {
    try {
      return fs.exists(path);
    } catch (IOException e) {
      throw new java.io.UncheckedIOException("cannot look at " + path + ": " + e.getMessage(), e);
    }
  }

  static Optional<RunIdentity> read(FileSystem fs, Path out) throws IOException {
    Properties p = new Properties();
    try (InputStream in = fs.open(new Path(out, FILE))) {
      p.load(new java.io.InputStreamReader(in, StandardCharsets.UTF_8));
    } catch (FileNotFoundException e) {
      return Optional.empty();
    }
    if (CommandRunIdentity.KIND.equals(p.getProperty("run"))) {
      throw refused(out, "the outputs of a muster spark-run");
    }
    try {
      return Optional.of(new RunIdentity(p.getProperty("data", ""),
          Arrays.asList(p.getProperty("features", "").split(",", -1)), Integer.parseInt(p.getProperty("classes")),
          Long.parseLong(p.getProperty("seed"))));
    } catch (RuntimeException e) {
      throw new IOException(new Path(out, FILE) + " does not parse (" + e.getMessage() + "); delete it, or give "
          + "--overwrite", e);
    }
  }

  private void write(FileSystem fs, Path out) throws IOException {
    Properties p = new Properties();
    p.setProperty("data", data);
    p.setProperty("features", String.join(",", features));
    p.setProperty("classes", Integer.toString(classes));
    p.setProperty("seed", Long.toString(seed));
    fs.mkdirs(out);
    try (OutputStream o = fs.create(new Path(out, FILE), true)) {
      p.store(new java.io.OutputStreamWriter(o, StandardCharsets.UTF_8),
          "what the outputs here belong to (muster demo); another run refuses this directory without --overwrite");
    }
  }
}
