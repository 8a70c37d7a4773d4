package io.muster.yarn;

import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.security.DigestInputStream;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;
import java.util.jar.JarEntry;
import java.util.jar.JarOutputStream;
import java.util.stream.Stream;
import java.security.PrivilegedExceptionAction;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.security.UserGroupInformation;
import org.apache.hadoop.yarn.api.ApplicationConstants;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Muster's runtime on the cluster's file system: every class-path entry (a class directory is
 * packed into a jar first) copied once to {@code <home>/.muster/lib/<sha256 prefix>-<name>.jar},
 * named by its content so that an unchanged jar is never uploaded twice, and shipped to every
 * container, whose class path is then its working directory's jars.
 */
final class RuntimeStaging {
  private static final Logger log = LoggerFactory.getLogger(RuntimeStaging.class);
  private static final String LIB = ".muster/lib";

  private RuntimeStaging() {}

  static YarnJob stage(FileSystem fs, YarnJob job) throws IOException {
    Path lib = new Path(fs.getHomeDirectory(), LIB);
    List<YarnJob.Shipped> shipped = new ArrayList<>(job.shipped());
    for (String entry : job.classpath()) {
      java.nio.file.Path local = java.nio.file.Path.of(entry);
      if (entry.isBlank() || !Files.exists(local)) {
        continue; // a class path may name what is not there; the JVM skips it too
      }
      java.nio.file.Path jar = Files.isDirectory(local) ? packed(local) : local;
      try {
        String base = local.getFileName().toString().replaceAll("[^\\w.-]", "_");
        String name = sha256(jar).substring(0, 16) + "-" + base + (base.endsWith(".jar") ? "" : ".jar");
        Path target = new Path(lib, name);
        if (!fs.exists(target)) {
          Path partial = new Path(lib, "." + name + ".partial");
          fs.copyFromLocalFile(false, true, new Path(jar.toUri()), partial);
          fs.rename(partial, target); // another client may have won the race; either copy is the same bytes
        }
        FileStatus status = fs.getFileStatus(target);
        shipped.add(new YarnJob.Shipped(name, fs.makeQualified(target).toUri().toString(), false, status.getLen(),
            status.getModificationTime()));
      } finally {
        if (jar != local) {
          Files.deleteIfExists(jar);
        }
      }
    }
    return job.toBuilder().classpath(List.of("*")).shipped(shipped).build();
  }

  /**
   * Deletes the job's staged files ({@code <home>/.muster/<application id>/}), if it had any: the
   * master's last act. The runtime's jars stay for later jobs.
   */
  static void deleteStagedFiles(Configuration conf, YarnJob job, String applicationId) {
    if (job.shipped().isEmpty()) {
      return;
    }
    // as the submitting user, under whose home the client staged them: this process's own login is the node's user
    UserGroupInformation submitter = UserGroupInformation.createRemoteUser(
        System.getenv(ApplicationConstants.Environment.USER.name()));
    try {
      submitter.addCredentials(UserGroupInformation.getCurrentUser().getCredentials());
      submitter.doAs((PrivilegedExceptionAction<Void>) () -> {
        FileSystem fs = FileSystem.get(conf);
        Path staging = MusterClient.stagingDir(fs, applicationId);
        if (!fs.delete(staging, true)) {
          log.warn("the job's staged files were not at {}", fs.makeQualified(staging));
        }
        return null;
      });
    } catch (IOException | InterruptedException e) {
      log.warn("cannot delete the job's staged files: {}", e.toString());
    }
  }

  /** Whether {@code file} is one of the runtime's jars {@link #stage} copied, which no later job changes. */
  static boolean isStagedRuntime(YarnJob.Shipped file) {
    String path = java.net.URI.create(file.uri()).getPath();
    return path != null && path.contains("/" + LIB + "/");
  }

  /** A class directory as a jar, its entries in a fixed order with fixed times, so equal contents hash equally. */
  static java.nio.file.Path packed(java.nio.file.Path dir) throws IOException {
    java.nio.file.Path jar = Files.createTempFile("muster-" + dir.getFileName(), ".jar");
    try (OutputStream file = Files.newOutputStream(jar); JarOutputStream out = new JarOutputStream(file);
        Stream<java.nio.file.Path> files = Files.walk(dir)) {
      for (java.nio.file.Path p : files.filter(Files::isRegularFile).sorted().toList()) {
        JarEntry entry = new JarEntry(dir.relativize(p).toString().replace('\\', '/'));
        entry.setTime(0);
        out.putNextEntry(entry);
        Files.copy(p, out);
        out.closeEntry();
      }
    }
    return jar;
  }

  static String sha256(java.nio.file.Path file) throws IOException {
    try (InputStream in = new DigestInputStream(Files.newInputStream(file), MessageDigest.getInstance("SHA-256"))) {
      MessageDigest digest = ((DigestInputStream) in).getMessageDigest();
      in.transferTo(OutputStream.nullOutputStream());
      return HexFormat.of().formatHex(digest.digest());
    } catch (NoSuchAlgorithmException e) {
      throw new UncheckedIOException(new IOException("SHA-256 is missing from this JVM", e));
    }
  }
}
