package io.muster.checkpoint;

import com.google.protobuf.TextFormat;
import io.muster.proto.tf.CheckpointState;
import java.io.FileNotFoundException;
import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.OptionalInt;
import java.util.Set;
import java.util.TreeSet;
import java.util.UUID;
import java.util.concurrent.Future;
import java.util.function.Consumer;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * TensorFlow's {@code tf.train.CheckpointManager} on any Hadoop file system: numbered checkpoints
 * {@code ckpt-1}, {@code ckpt-2}, ... in TensorFlow's V2 format, and the {@code checkpoint} state
 * file in TensorFlow's text format with relative paths, so TensorFlow finds and reads them.
 *
 * <p>Nothing is lost: a checkpoint's data and index are complete (written, synced, renamed) before
 * the state file names it; the state file is replaced atomically (written under a temporary name,
 * then renamed over the old one); checkpoints beyond {@code maxToKeep} are deleted only after the
 * state file that no longer names them is in place. A process killed at any point leaves
 * {@link #latest()} on a complete checkpoint, and the chief's next manager of the directory deletes
 * the checkpoint files such a save left outside the state file. Only the chief writes here; the other tasks (see
 * {@link WritePolicy}) write the same checkpoint to their {@code workertemp_<i>} directory, which
 * is deleted after every save. A manager recovers the managed list and the numbering from an
 * existing state file. Not safe for two chiefs writing one directory.
 *
 * <p>A manager owns the threads its saves write through; {@link #close()} ends them, after which
 * {@link #save} fails and restoring still works.
 *
 * <p>One file because "nothing is lost" is one ordering of writes, renames and deletions across
 * the save, the state file and the clean-up of a killed save's leftovers, and it is checked by
 * reading it in one place; the format itself ({@link BundleWriter}, {@link BundleReader}) is apart.
 */
public final class CheckpointManager implements AutoCloseable {

  public static final String STATE_FILE = "checkpoint";
  private static final Logger log = LoggerFactory.getLogger(CheckpointManager.class);

  /**
   * @param maxToKeep how many recent checkpoints to keep; empty keeps all (TensorFlow's {@code None})
   * @param keepEvery additionally keep one checkpoint per this interval forever
   *     ({@code keep_checkpoint_every_n_hours})
   * @param checkpointName the file name prefix, {@code ckpt} by default
   */
  public record Options(OptionalInt maxToKeep, Optional<Duration> keepEvery, String checkpointName) {
    public static final Options DEFAULTS = new Options(OptionalInt.of(5), Optional.empty(), "ckpt");

    public Options {
      if (maxToKeep.isPresent() && maxToKeep.getAsInt() <= 0) {
        throw new IllegalArgumentException("Expected a positive integer or `None` for `max_to_keep`, got "
            + maxToKeep.getAsInt() + ".");
      }
      if (keepEvery.isPresent() && (keepEvery.get().isNegative() || keepEvery.get().isZero())) {
        throw new IllegalArgumentException("keepEvery must be positive, was " + keepEvery.get());
      }
      if (checkpointName.isEmpty() || checkpointName.contains("/")) {
        throw new IllegalArgumentException("checkpointName must be a non-empty file name, was '" + checkpointName + "'");
      }
    }

    public Options withMaxToKeep(int n) {
      return new Options(OptionalInt.of(n), keepEvery, checkpointName);
    }

    public Options keepingAll() {
      return new Options(OptionalInt.empty(), keepEvery, checkpointName);
    }

    public Options withKeepEvery(Duration interval) {
      return new Options(maxToKeep, Optional.of(interval), checkpointName);
    }
  }

  private record Managed(String name, double timestamp) {}

  private final FileSystem fs;
  private final Path directory;
  private final WritePolicy policy;
  private final Options options;
  private final Consumer<SaveStep> progress;
  private final Pattern numbered;
  private final IoThreads io;
  private final AtomicFiles files = new AtomicFiles();
  /** The chief's claim on the directory, where its policy names the attempt it belongs to. */
  private final WriterFence fence;
  private List<Managed> managed = new ArrayList<>();
  private double lastPreserved;
  private long nextNumber = 1;
  private boolean closed;

  public CheckpointManager(FileSystem fs, Path directory, WritePolicy policy, Options options) throws IOException {
    this(fs, directory, policy, options, step -> {});
  }

  CheckpointManager(FileSystem fs, Path directory, WritePolicy policy, Options options, Consumer<SaveStep> progress)
      throws IOException {
    this.fs = AtomicFiles.unwrap(fs);
    this.directory = this.fs.makeQualified(directory);
    this.policy = policy;
    this.options = options;
    this.progress = progress;
    this.numbered = Pattern.compile(Pattern.quote(options.checkpointName()) + "-(\\d+)");
    this.lastPreserved = now() - 1;
    this.io = new IoThreads("the checkpoint manager of " + this.directory);
    // before anything is deleted: a stale chief must not clean up after a later attempt's
    try {
      this.fence = policy.chief() && policy.writer().isPresent()
          ? WriterFence.claim(this.fs, this.directory, policy.writer().get(), files) : null;
    } catch (IOException e) {
      io.close();
      throw e;
    }
    if (policy.chief()) {
      deleteLeftovers();
    }
    Optional<CheckpointState> state = readState(this.fs, this.directory);
    if (state.isPresent()) {
      CheckpointState s = state.get();
      if (s.getLastPreservedTimestamp() > 0) {
        lastPreserved = s.getLastPreservedTimestamp();
      }
      for (int i = 0; i < s.getAllModelCheckpointPathsCount(); i++) {
        double ts = i < s.getAllModelCheckpointTimestampsCount() ? s.getAllModelCheckpointTimestamps(i) : now();
        String name = new Path(s.getAllModelCheckpointPaths(i)).getName();
        if (ts > lastPreserved) {
          managed.add(new Managed(name, ts));
        }
        noteNumber(name);
      }
      noteNumber(new Path(s.getModelCheckpointPath()).getName());
      if (policy.chief()) {
        deleteUnnamed(s);
      }
      log.info("recovered {} checkpoint(s) from {}; the next is {}-{}", managed.size(), this.directory,
          options.checkpointName(), nextNumber);
    }
  }

  /** Temporary files of a save that was killed: never named by the state file, safe to delete for the one chief. */
  private void deleteLeftovers() throws IOException {
    FileStatus[] files;
    try {
      files = fs.listStatus(directory);
    } catch (FileNotFoundException e) {
      return;
    } catch (IOException e) {
      throw new IOException("cannot list the checkpoint directory " + directory + ": " + e.getMessage(), e);
    }
    for (FileStatus f : files) {
      String name = f.getPath().getName();
      if (f.isFile() && (name.contains(".tempstate") || name.startsWith(STATE_FILE + ".tmp")
          || name.startsWith(WriterFence.FILE + ".tmp"))) {
        log.info("deleting {}, left by a save that did not finish", f.getPath());
        fs.delete(f.getPath(), false);
      }
    }
  }

  /**
   * Checkpoints a killed save left that the state file does not name: one written after the state
   * file's newest (killed before the state named it), and, unless {@code keepEvery} preserves old
   * checkpoints outside the list, one older than the list (killed after the state stopped naming it,
   * before its files were deleted). Neither is ever read or deleted otherwise.
   */
  private void deleteUnnamed(CheckpointState state) throws IOException {
    Set<String> named = new HashSet<>();
    named.add(new Path(state.getModelCheckpointPath()).getName());
    state.getAllModelCheckpointPathsList().forEach(p -> named.add(new Path(p).getName()));
    long newestNamed = nextNumber - 1;
    Pattern file = Pattern.compile(numbered.pattern() + "(\\.index|\\.data-\\d{5}-of-\\d{5})");
    Set<String> doomed = new TreeSet<>();
    for (FileStatus f : fs.listStatus(directory)) {
      Matcher m = file.matcher(f.getPath().getName());
      if (!f.isFile() || !m.matches()) {
        continue;
      }
      String name = options.checkpointName() + "-" + m.group(1);
      boolean newer = Long.parseLong(m.group(1)) > newestNamed;
      if (!named.contains(name) && (newer || options.keepEvery().isEmpty())) {
        doomed.add(name);
      }
    }
    for (String name : doomed) {
      log.info("deleting {}, left by a save that did not finish", new Path(directory, name));
      deleteCheckpointFiles(name);
    }
  }

  private void noteNumber(String name) {
    Matcher m = numbered.matcher(name);
    if (m.matches()) {
      nextNumber = Math.max(nextNumber, Long.parseLong(m.group(1)) + 1);
    }
  }

  public Path directory() {
    return directory;
  }

  /** Saves {@code ckpt-<next number>}; see {@link #save(Map, long)}. */
  public synchronized Path save(Map<String, Tensor> tensors) throws IOException {
    return save(tensors, nextNumber);
  }

  /**
   * Saves the tensors as checkpoint {@code number} and returns its prefix in the managed directory.
   * On a non-chief task the checkpoint goes to the task's temp directory, which is then deleted.
   *
   * @throws IOException naming the path and the cause (no space, no permission, ...); the previous
   *     checkpoint stays the latest and readable
   * @throws IllegalStateException when the manager is closed
   */
  public synchronized Path save(Map<String, Tensor> tensors, long number) throws IOException {
    if (closed) {
      throw new IllegalStateException("the checkpoint manager of " + directory + " is closed");
    }
    String name = options.checkpointName() + "-" + number;
    Path prefix = new Path(directory, name);
    nextNumber = Math.max(nextNumber, number + 1);
    if (!policy.chief()) {
      try {
        BundleWriter.write(fs, new Path(policy.writeDir(fs, directory), name), tensors, io, files);
      } finally {
        policy.removeTempDir(fs, directory);
      }
      return prefix;
    }
    double timestamp = now();
    List<Managed> next = new ArrayList<>(managed.stream().filter(m -> !m.name().equals(name)).toList());
    next.add(new Managed(name, timestamp));
    List<String> doomed = new ArrayList<>();
    double preserved = lastPreserved;
    while (options.maxToKeep().isPresent() && next.size() > options.maxToKeep().getAsInt()) {
      Managed oldest = next.remove(0);
      if (options.keepEvery().isPresent()
          && oldest.timestamp() - options.keepEvery().get().toMillis() / 1000.0 >= preserved) {
        preserved = oldest.timestamp();
      } else {
        doomed.add(oldest.name());
      }
    }
    // Every byte is written under temporary names first (state, index and data at once); then
    // renames make the checkpoint, then the state naming it, visible; only then are the
    // checkpoints it no longer names deleted.
    Path stateTemp;
    Future<Path> stateWrite = null;
    try {
      fs.mkdirs(directory);
      double keptSince = preserved;
      stateWrite = io.start(() -> writeStateTemp(next, keptSince));
      BundleWriter.Pending pending = BundleWriter.prepare(fs, prefix, tensors, io, files);
      try {
        stateTemp = IoThreads.await(stateWrite);
        if (fence != null) {
          fence.check(); // the last moment before anything of this save becomes visible
        }
        pending.commit(progress);
      } catch (IOException | RuntimeException e) {
        pending.abort();
        throw e;
      }
    } catch (IOException | RuntimeException e) {
      Path written = stateWrite == null ? null : IoThreads.awaitQuietly(stateWrite);
      if (written != null) {
        fs.delete(written, false);
      }
      if (e instanceof StaleWriterException stale) {
        throw stale; // its temporary files are gone; what the later attempt wrote is untouched
      }
      if (managed.stream().noneMatch(m -> m.name().equals(name))) {
        deleteCheckpointFiles(name); // a data file renamed before the index failed
      }
      throw new IOException("could not save checkpoint " + prefix + ": " + e.getMessage()
          + "; the latest complete checkpoint is still " + latest().map(Path::toString).orElse("none"), e);
    }
    files.replace(fs, stateTemp, new Path(directory, STATE_FILE));
    progress.accept(SaveStep.STATE_REPLACED);
    managed = next;
    lastPreserved = preserved;
    for (String old : doomed) {
      deleteCheckpointFiles(old);
    }
    log.info("saved checkpoint {} ({} tensors){}", prefix, tensors.size(),
        doomed.isEmpty() ? "" : "; deleted " + String.join(", ", doomed));
    return prefix;
  }

  /** Ends the threads saves write through, once a save in progress has ended. */
  @Override
  public synchronized void close() {
    closed = true;
    io.close();
  }

  /** The state file naming {@code checkpoints}, under a temporary name. */
  private Path writeStateTemp(List<Managed> checkpoints, double preserved) throws IOException {
    CheckpointState.Builder state = CheckpointState.newBuilder()
        .setModelCheckpointPath(checkpoints.get(checkpoints.size() - 1).name())
        .setLastPreservedTimestamp(preserved);
    for (Managed m : checkpoints) {
      state.addAllModelCheckpointPaths(m.name()).addAllModelCheckpointTimestamps(m.timestamp());
    }
    Path temp = new Path(directory, STATE_FILE + ".tmp" + UUID.randomUUID().toString().replace("-", ""));
    byte[] text = TextFormat.printer().printToString(state.build()).getBytes(StandardCharsets.UTF_8);
    try {
      BundleWriter.writeFile(CheckpointClient.of(fs), temp, out -> out.write(text));
    } catch (IOException e) {
      fs.delete(temp, false);
      throw new IOException("could not write the checkpoint state " + temp + ": " + e.getMessage(), e);
    }
    progress.accept(SaveStep.STATE_TEMP_WRITTEN);
    return temp;
  }

  private void deleteCheckpointFiles(String name) throws IOException {
    Path prefix = new Path(directory, name);
    fs.delete(Bundle.indexFile(prefix), false);
    FileStatus[] data = fs.globStatus(new Path(directory, name + ".data-?????-of-?????"));
    if (data != null) {
      for (FileStatus f : data) {
        fs.delete(f.getPath(), false);
      }
    }
  }

  /** The managed checkpoints, oldest first, as prefixes. */
  public synchronized List<Path> checkpoints() {
    return managed.stream().map(m -> new Path(directory, m.name())).toList();
  }

  /** The newest checkpoint the state file names whose index exists, read fresh from the file system. */
  public Optional<Path> latest() throws IOException {
    return latestCheckpoint(fs, directory);
  }

  /** Every tensor of a checkpoint, whatever model it holds (to inspect one; to resume, see the overload). */
  public Map<String, Tensor> restore(Path prefix) throws IOException {
    return BundleReader.open(fs, prefix).readAll();
  }

  /**
   * Every tensor of a checkpoint, after checking that it holds exactly the caller's variables
   * (names, dtypes and shapes of {@code like}; their values do not matter), as {@link #restoreInto}
   * checks them against the caller's arrays.
   *
   * @throws CheckpointMismatchException naming each difference, before any data is read
   */
  public Map<String, Tensor> restore(Path prefix, Map<String, Tensor> like) throws IOException {
    BundleReader reader = BundleReader.open(fs, prefix);
    reader.requireVariables(like);
    return reader.readAll();
  }

  /**
   * Restores into the model's own arrays, as TensorFlow restores into existing variables; see
   * {@link BundleReader#readInto}. Faster than {@link #restore} for large models (no new memory).
   */
  public void restoreInto(Path prefix, Map<String, ?> arrays) throws IOException {
    BundleReader.open(fs, prefix).readInto(arrays);
  }

  /**
   * {@code tf.train.latest_checkpoint}: the checkpoint the state file in {@code directory} names,
   * if its {@code .index} exists; else the newest listed one that exists.
   */
  public static Optional<Path> latestCheckpoint(FileSystem fs, Path directory) throws IOException {
    FileSystem raw = AtomicFiles.unwrap(fs);
    Optional<CheckpointState> state = readState(raw, directory);
    if (state.isEmpty()) {
      return Optional.empty();
    }
    List<String> candidates = new ArrayList<>();
    candidates.add(state.get().getModelCheckpointPath());
    List<String> all = new ArrayList<>(state.get().getAllModelCheckpointPathsList());
    java.util.Collections.reverse(all);
    candidates.addAll(all);
    for (String candidate : candidates) {
      Path prefix = new Path(candidate).isAbsolute() ? new Path(candidate) : new Path(directory, candidate);
      if (raw.exists(Bundle.indexFile(prefix))) {
        return Optional.of(prefix);
      }
    }
    return Optional.empty();
  }

  /** The state file of a directory, if there is one that parses (one that does not is logged and ignored). */
  public static Optional<CheckpointState> readState(FileSystem fs, Path directory) throws IOException {
    try {
      return readValidState(fs, directory);
    } catch (InvalidStateException e) {
      log.warn("ignoring {}", e.getMessage());
      return Optional.empty();
    }
  }

  /** A state file that does not parse as TensorFlow's {@code CheckpointState} text, or names no checkpoint. */
  public static final class InvalidStateException extends IOException {
    InvalidStateException(String message) {
      super(message);
    }
  }

  /**
   * The state file of a directory; empty when there is none.
   *
   * @throws InvalidStateException naming the file when it does not parse or names no checkpoint
   */
  public static Optional<CheckpointState> readValidState(FileSystem fs, Path directory) throws IOException {
    Path file = new Path(directory, STATE_FILE);
    String text;
    try (InputStream in = fs.open(file)) {
      text = new String(in.readAllBytes(), StandardCharsets.UTF_8);
    } catch (FileNotFoundException e) {
      return Optional.empty();
    } catch (IOException e) {
      throw new IOException("cannot read the checkpoint state " + file + ": " + e.getMessage(), e);
    }
    CheckpointState.Builder state = CheckpointState.newBuilder();
    try {
      TextFormat.Parser.newBuilder().setAllowUnknownFields(true).build().merge(text, state);
    } catch (TextFormat.ParseException e) {
      throw new InvalidStateException("unreadable checkpoint state " + file + ": " + e.getMessage());
    }
    if (state.getModelCheckpointPath().isEmpty()) {
      throw new InvalidStateException("invalid checkpoint state " + file + ": no model_checkpoint_path");
    }
    return Optional.of(state.build());
  }

  private static double now() {
    return System.currentTimeMillis() / 1000.0;
  }
}
