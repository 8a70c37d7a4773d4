package io.muster.checkpoint;

import java.io.IOException;
import org.apache.hadoop.fs.FileContext;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.LocalFileSystem;
import org.apache.hadoop.fs.Options;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.RawLocalFileSystem;
import org.apache.hadoop.hdfs.DistributedFileSystem;

/** Making a file visible only when it is complete: write elsewhere, then rename over the target. */
final class AtomicFiles {
  private AtomicFiles() {}

  /**
   * The file system to write checkpoints through: the local file system without Hadoop's
   * {@code .crc} side files (TensorFlow neither writes nor expects them), any other unchanged.
   */
  static FileSystem unwrap(FileSystem fs) {
    return fs instanceof LocalFileSystem local ? local.getRawFileSystem() : fs;
  }

  /** Renames {@code source} to {@code target}, replacing it atomically where the file system can (HDFS, POSIX). */
  static void replace(FileSystem fs, Path source, Path target) throws IOException {
    if (fs instanceof RawLocalFileSystem) {
      // rename(2) replaces the target atomically
      if (!fs.rename(source, target)) {
        throw new IOException("could not rename " + source + " to " + target);
      }
      return;
    }
    if (fs instanceof DistributedFileSystem hdfs) {
      hdfs.rename(source, target, Options.Rename.OVERWRITE);
      return;
    }
    // Creating a FileContext opens a new client: keep one per file system.
    FileContext context = CONTEXTS.computeIfAbsent(fs.getUri(), uri -> {
      try {
        return FileContext.getFileContext(uri, fs.getConf());
      } catch (IOException e) {
        throw new java.io.UncheckedIOException(e);
      }
    });
    context.rename(source, target, Options.Rename.OVERWRITE);
  }

  private static final java.util.Map<java.net.URI, FileContext> CONTEXTS = new java.util.concurrent.ConcurrentHashMap<>();
}
