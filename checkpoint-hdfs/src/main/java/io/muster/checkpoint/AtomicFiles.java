package io.muster.checkpoint;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.URI;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import org.apache.hadoop.fs.FileContext;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.LocalFileSystem;
import org.apache.hadoop.fs.Options;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.RawLocalFileSystem;
import org.apache.hadoop.hdfs.DistributedFileSystem;
import org.apache.hadoop.security.UserGroupInformation;

/**
 * Making a file visible only when it is complete: write elsewhere, then rename over the target.
 * On file systems other than HDFS and the local one the rename goes through a {@link FileContext},
 * which opens a client of its own acting as the user current when it was made; an instance keeps
 * one per file system and user for as long as its owner (a {@link CheckpointManager}) lives.
 */
final class AtomicFiles {
  private record Key(URI fileSystem, UserGroupInformation user) {}

  private final Map<Key, FileContext> contexts = new ConcurrentHashMap<>();

  /**
   * The file system to write checkpoints through: the local file system without Hadoop's
   * {@code .crc} side files (TensorFlow neither writes nor expects them), any other unchanged.
   */
  static FileSystem unwrap(FileSystem fs) {
    return fs instanceof LocalFileSystem local ? local.getRawFileSystem() : fs;
  }

  /** Renames {@code source} to {@code target}, replacing it atomically where the file system can (HDFS, POSIX). */
  void replace(FileSystem fs, Path source, Path target) throws IOException {
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
    context(fs).rename(source, target, Options.Rename.OVERWRITE);
  }

  /** The context renames on {@code fs} go through for the current user, made on first use. */
  FileContext context(FileSystem fs) throws IOException {
    Key key = new Key(fs.getUri(), UserGroupInformation.getCurrentUser());
    try {
      return contexts.computeIfAbsent(key, k -> {
        try {
          return FileContext.getFileContext(k.fileSystem(), fs.getConf());
        } catch (IOException e) {
          throw new UncheckedIOException(e);
        }
      });
    } catch (UncheckedIOException e) {
      throw e.getCause();
    }
  }
}
