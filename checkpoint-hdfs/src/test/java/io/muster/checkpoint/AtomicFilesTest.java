package io.muster.checkpoint;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotSame;
import static org.junit.jupiter.api.Assertions.assertSame;

import java.io.IOException;
import java.io.OutputStream;
import java.nio.charset.StandardCharsets;
import java.security.PrivilegedExceptionAction;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FileContext;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.security.UserGroupInformation;
import org.junit.jupiter.api.Test;

/**
 * Renames through a {@link org.apache.hadoop.fs.FileContext}, the path for file systems other than
 * HDFS and the raw local one; the checksummed local file system stands in for them.
 */
class AtomicFilesTest {
  private static final java.nio.file.Path BASE = java.nio.file.Path.of("target", "atomic-files-test").toAbsolutePath();

  private static <T> T as(String user, PrivilegedExceptionAction<T> action) throws Exception {
    return UserGroupInformation.createRemoteUser(user).doAs(action);
  }

  @Test
  void twoUsersOnOneFileSystemGetTheirOwnContexts() throws Exception {
    FileSystem fs = FileSystem.getLocal(new Configuration());
    AtomicFiles files = new AtomicFiles();
    FileContext alice = as("alice", () -> files.context(fs));
    FileContext bob = as("bob", () -> files.context(fs));
    assertNotSame(alice, bob);
    assertEquals("alice", alice.getUgi().getShortUserName());
    assertEquals("bob", bob.getUgi().getShortUserName());
  }

  @Test
  void oneUserKeepsOneContextPerFileSystem() throws Exception {
    FileSystem fs = FileSystem.getLocal(new Configuration());
    AtomicFiles files = new AtomicFiles();
    UserGroupInformation carol = UserGroupInformation.createRemoteUser("carol");
    assertSame(carol.doAs((PrivilegedExceptionAction<FileContext>) () -> files.context(fs)),
        carol.doAs((PrivilegedExceptionAction<FileContext>) () -> files.context(fs)));
  }

  @Test
  void replaceOverwritesTheTargetThroughAFileContext() throws IOException {
    FileSystem fs = FileSystem.getLocal(new Configuration());
    Path dir = new Path(BASE.resolve("replace").toUri());
    fs.delete(dir, true);
    Path source = new Path(dir, "state.tmp");
    Path target = new Path(dir, "state");
    write(fs, target, "old");
    write(fs, source, "new");
    new AtomicFiles().replace(fs, source, target);
    assertEquals("new", new String(fs.open(target).readAllBytes(), StandardCharsets.UTF_8));
    assertFalse(fs.exists(source));
  }

  private static void write(FileSystem fs, Path file, String text) throws IOException {
    try (OutputStream out = fs.create(file, true)) {
      out.write(text.getBytes(StandardCharsets.UTF_8));
    }
  }
}
