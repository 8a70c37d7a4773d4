package io.muster.cli;

import io.muster.yarn.YarnJob;
import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Locale;

/**
 * {@code --files} and {@code --archives} as {@code muster submit} takes them: each a local file
 * that must be there, and an archive whose first bytes are of the format its name says, checked
 * before anything is staged or submitted.
 */
final class ShippedFiles {
  private ShippedFiles() {}

  /** {@code path} or {@code path#name}, as {@code --files} and {@code --archives} take them. */
  static YarnJob.Shipped parse(String spec, boolean archive) {
    int hash = spec.lastIndexOf('#');
    String path = hash < 0 ? spec : spec.substring(0, hash);
    Path local = Path.of(path).toAbsolutePath();
    if (!Files.isRegularFile(local)) {
      throw new IllegalArgumentException((archive ? "--archives" : "--files") + ": " + local
          + " is not a readable file");
    }
    if (archive) {
      checkArchive(local);
    }
    String name = hash < 0 ? local.getFileName().toString() : spec.substring(hash + 1);
    return new YarnJob.Shipped(name, local.toUri().toString(), archive, 0, 0);
  }

  /** An archive YARN unpacks by its name (.zip, .jar, .tar, .tar.gz, .tgz) whose first bytes are of that format. */
  private static void checkArchive(Path file) {
    String name = file.getFileName().toString().toLowerCase(Locale.ROOT);
    byte[] head;
    try (InputStream in = Files.newInputStream(file)) {
      head = in.readNBytes(512);
    } catch (IOException e) {
      throw new IllegalArgumentException("--archives: " + file + " cannot be read: " + e.getMessage());
    }
    String format;
    boolean matches;
    if (name.endsWith(".zip") || name.endsWith(".jar")) {
      format = "a zip archive";
      matches = head.length >= 4 && head[0] == 'P' && head[1] == 'K' && head[2] == 3 && head[3] == 4;
    } else if (name.endsWith(".tar.gz") || name.endsWith(".tgz")) {
      format = "gzip-compressed";
      matches = head.length >= 2 && (head[0] & 0xff) == 0x1f && (head[1] & 0xff) == 0x8b;
    } else if (name.endsWith(".tar")) {
      format = "a tar archive";
      matches = head.length >= 262 && new String(head, 257, 5, StandardCharsets.US_ASCII)
          .equals("ustar");
    } else {
      throw new IllegalArgumentException("--archives: " + file + " is not named as an archive YARN unpacks (.zip, "
          + ".jar, .tar, .tar.gz or .tgz); ship it with --files instead");
    }
    if (!matches) {
      throw new IllegalArgumentException("--archives: " + file + " is named as an archive but is not "
          + format + "; give the archive itself");
    }
  }
}
