package io.muster.checkpoint;

import java.io.FileNotFoundException;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.nio.charset.StandardCharsets;
import java.util.Optional;
import java.util.UUID;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;

/**
 * A chief's claim on the directory it writes, for one attempt of its job: the file
 * {@value #FILE} names the job run and the attempt of the directory's latest writer. A chief claims
 * the directory when its manager opens it, unless a later attempt of the same run has (then it is
 * stale, and refused), and checks the claim again just before each save becomes visible: a chief
 * whose host was cut off, and healed after the launcher ran the gang again, finds the next
 * attempt's claim and neither renames over its checkpoints nor deletes them. A claim of another
 * run (a new job on the same directory) is simply replaced. The check and the rename are not one
 * atomic step; the launchers end a cut-off attempt's tasks within seconds, and this closes the
 * window that remains after a heal.
 */
final class WriterFence {
  static final String FILE = ".muster-writer";

  private final FileSystem fs;
  private final Path file;
  private final WritePolicy.Writer writer;

  private WriterFence(FileSystem fs, Path directory, WritePolicy.Writer writer) {
    this.fs = fs;
    this.file = new Path(directory, FILE);
    this.writer = writer;
  }

  /**
   * Claims {@code directory} for {@code writer}.
   *
   * @throws StaleWriterException when a later attempt of the same run holds it
   */
  static WriterFence claim(FileSystem fs, Path directory, WritePolicy.Writer writer, AtomicFiles files)
      throws IOException {
    WriterFence fence = new WriterFence(fs, directory, writer);
    Optional<WritePolicy.Writer> holder = fence.holder();
    if (holder.isPresent() && fence.isLaterThanMine(holder.get())) {
      throw fence.stale(holder.get());
    }
    if (!holder.equals(Optional.of(writer))) {
      fs.mkdirs(directory);
      Path temp = new Path(directory, FILE + ".tmp" + UUID.randomUUID().toString().replace("-", ""));
      try (OutputStream out = fs.create(temp, false)) {
        out.write((writer.run() + " " + writer.attempt() + "\n").getBytes(StandardCharsets.UTF_8));
      }
      files.replace(fs, temp, fence.file);
    }
    return fence;
  }

  /** @throws StaleWriterException when another writer has claimed the directory since this one did */
  void check() throws IOException {
    Optional<WritePolicy.Writer> holder = holder();
    if (holder.isPresent() && !holder.get().equals(writer)) {
      throw stale(holder.get());
    }
  }

  private boolean isLaterThanMine(WritePolicy.Writer holder) {
    return holder.run().equals(writer.run()) && holder.attempt() > writer.attempt();
  }

  private StaleWriterException stale(WritePolicy.Writer holder) {
    String who = holder.run().equals(writer.run()) ? "attempt " + (holder.attempt() + 1) + " of this job"
        : "another run of a job (" + holder.run() + ")";
    return new StaleWriterException("attempt " + (writer.attempt() + 1) + "'s chief may not write in "
        + file.getParent() + ": " + who + " has written there since (" + FILE + "); this task belongs to an attempt "
        + "that has ended, and should exit");
  }

  private Optional<WritePolicy.Writer> holder() throws IOException {
    byte[] bytes;
    try (InputStream in = fs.open(file)) {
      bytes = in.readAllBytes();
    } catch (FileNotFoundException e) {
      return Optional.empty();
    }
    String[] parts = new String(bytes, StandardCharsets.UTF_8).strip().split(" ");
    try {
      return Optional.of(new WritePolicy.Writer(parts[0], Integer.parseInt(parts[1])));
    } catch (RuntimeException e) { // not ours, or cut short: the next claim replaces it
      return Optional.empty();
    }
  }
}
