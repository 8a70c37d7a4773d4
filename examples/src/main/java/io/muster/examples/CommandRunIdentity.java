package io.muster.examples;

import java.io.FileNotFoundException;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Optional;
import java.util.Properties;
import java.util.stream.Collectors;
import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;

/**
 * What a {@code spark-run}'s output directory belongs to, kept in
 * {@code <out>/muster-run.properties} (the file the demo keeps there too): the command line and the
 * data (a file's URI, size and modification time, or none). A run with the same identity is the
 * same run, resumed: its command finds its earlier outputs in {@code MUSTER_OUTPUT_DIR}, as
 * TensorFlow's {@code BackupAndRestore} expects. The gang's shape (workers, ps, GPUs, attempts) is
 * not part of it. Any other run refuses the directory unless {@code --overwrite}, which deletes
 * what the directory holds, but only when an identity file says a Muster run wrote it: a directory
 * holding other files is never deleted.
 */
record CommandRunIdentity(String command, String data) {

  static final String KIND = "spark-run";

  /** The identity of {@code command} on {@code data} (empty: no data). */
  static CommandRunIdentity of(List<String> command, String dataIdentity) {
    return new CommandRunIdentity(command.stream().map(CommandRunIdentity::quote).collect(Collectors.joining(" ")),
        dataIdentity.isEmpty() ? "none" : dataIdentity);
  }

  private static String quote(String arg) {
    return arg.matches("[A-Za-z0-9_./:=@%+,-]+") ? arg : "'" + arg.replace("'", "'\\''") + "'";
  }

  /**
   * Makes {@code out} this run's: writes the identity file into an empty or missing directory,
   * accepts the same run's, and with {@code overwrite} empties another run's first.
   *
   * @return whether {@code out} already held this run's outputs (the command resumes with them)
   * @throws RunIdentity.OutputsInUseException saying what differs and what to do
   */
  boolean claim(FileSystem fs, Path out, boolean overwrite) throws IOException {
    List<String> present = list(fs, out);
    Optional<Properties> saved = read(fs, out);
    if (saved.isPresent() && !overwrite) {
      List<String> differences = differences(saved.get());
      if (differences.isEmpty()) {
        return true;
      }
      throw refused(out, "the outputs of another run: " + String.join("; ", differences) + "; give --out a new "
          + "directory, or --overwrite to replace them");
    }
    if (saved.isEmpty() && !present.isEmpty()) {
      throw refused(out, "files that do not say which run they belong to (" + brief(present) + "); give --out a new "
          + "directory (Muster replaces only a directory its own runs wrote)");
    }
    if (overwrite) {
      for (FileStatus child : fs.listStatus(out)) {
        fs.delete(child.getPath(), true);
      }
    }
    write(fs, out);
    return false;
  }

  private static RunIdentity.OutputsInUseException refused(Path out, String what) {
    return new RunIdentity.OutputsInUseException("--out " + out + " holds " + what);
  }

  /** Each way in which the saved identity (there) differs from this run (here). */
  private List<String> differences(Properties saved) {
    if (!KIND.equals(saved.getProperty("run"))) {
      return List.of("a muster demo run's, not a spark-run's");
    }
    List<String> differences = new ArrayList<>();
    if (!command.equals(saved.getProperty("command"))) {
      differences.add("command " + saved.getProperty("command") + " there, " + command + " here");
    }
    if (!data.equals(saved.getProperty("data"))) {
      differences.add("data " + saved.getProperty("data") + " there, " + data + " here");
    }
    return differences;
  }

  private static List<String> list(FileSystem fs, Path out) throws IOException {
    try {
      return Arrays.stream(fs.listStatus(out)).map(s -> s.getPath().getName()).sorted().toList();
    } catch (FileNotFoundException e) {
      return List.of();
    }
  }

  private static String brief(List<String> names) {
    return names.size() <= 3 ? String.join(", ", names) : String.join(", ", names.subList(0, 3)) + ", … "
        + names.size() + " in all";
  }

  private static Optional<Properties> read(FileSystem fs, Path out) throws IOException {
    Properties p = new Properties();
    try (InputStream in = fs.open(new Path(out, RunIdentity.FILE))) {
      p.load(new java.io.InputStreamReader(in, StandardCharsets.UTF_8));
      return Optional.of(p);
    } catch (FileNotFoundException e) {
      return Optional.empty();
    }
  }

  private void write(FileSystem fs, Path out) throws IOException {
    Properties p = new Properties();
    p.setProperty("run", KIND);
    p.setProperty("command", command);
    p.setProperty("data", data);
    fs.mkdirs(out);
    try (OutputStream o = fs.create(new Path(out, RunIdentity.FILE), true)) {
      p.store(new java.io.OutputStreamWriter(o, StandardCharsets.UTF_8),
          "what the outputs here belong to (muster spark-run); another run refuses this directory without --overwrite");
    }
  }
}
