package io.muster.yarn.local;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.util.EnumSet;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.CreateFlag;
import org.apache.hadoop.fs.FSDataInputStream;
import org.apache.hadoop.fs.FSDataOutputStream;
import org.apache.hadoop.fs.FileContext;
import org.apache.hadoop.fs.FsConstants;
import org.apache.hadoop.fs.Options.CreateOpts;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.permission.FsPermission;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** The NodeManagers' local file system in {@link LocalYarn}: what Hadoop's {@code LocalFs} does, permissions set in Java. */
class JavaPermissionsLocalFsTest {

  @TempDir java.nio.file.Path dir;

  @Test
  void itSetsThePermissionsChmodWouldAndKeepsTheChecksums() throws Exception {
    Configuration conf = new Configuration();
    FileContext files = FileContext.getFileContext(new JavaPermissionsLocalFs(FsConstants.LOCAL_FS_URI, conf), conf);
    Path container = new Path(dir.toUri().toString(), "container");
    files.mkdir(container, new FsPermission((short) 0710), false);
    assertEquals(0710, mode(dir.resolve("container")));

    Path script = new Path(container, "launch_container.sh");
    try (FSDataOutputStream out = files.create(script, EnumSet.of(CreateFlag.CREATE),
        CreateOpts.perms(new FsPermission((short) 0644)))) {
      out.write("exit 0\n".getBytes(StandardCharsets.UTF_8));
    }
    assertEquals(0644, mode(dir.resolve("container/launch_container.sh")));
    assertTrue(Files.exists(dir.resolve("container/.launch_container.sh.crc")), "LocalFs's checksum file");
    files.setPermission(script, new FsPermission((short) 0700));
    assertEquals(0700, mode(dir.resolve("container/launch_container.sh")));
    try (FSDataInputStream in = files.open(script)) {
      assertArrayEquals("exit 0\n".getBytes(StandardCharsets.UTF_8), in.readAllBytes());
    }

    // a sticky bit, which Java cannot set, is set by chmod as before
    files.setPermission(container, new FsPermission((short) 01777));
    assertEquals(01777, mode(dir.resolve("container")));
  }

  private static int mode(java.nio.file.Path path) throws Exception {
    return (Integer) Files.getAttribute(path, "unix:mode") & 07777;
  }
}
