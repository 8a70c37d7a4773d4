package io.muster.internal;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Comparator;
import java.util.stream.Stream;

/** A directory tree on the local disk, deleted. */
public final class FileTrees {
  private FileTrees() {}

  /** Deletes {@code root} and everything under it; nothing when it does not exist. */
  public static void delete(Path root) throws IOException {
    if (!Files.exists(root)) {
      return;
    }
    try (Stream<Path> tree = Files.walk(root)) {
      for (Path p : tree.sorted(Comparator.reverseOrder()).toList()) {
        Files.deleteIfExists(p);
      }
    }
  }
}
