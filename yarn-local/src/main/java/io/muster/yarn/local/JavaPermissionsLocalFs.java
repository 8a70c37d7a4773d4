package io.muster.yarn.local;

import java.io.IOException;
import java.net.URI;
import java.net.URISyntaxException;
import java.nio.file.Files;
import java.nio.file.attribute.PosixFilePermissions;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.ChecksumFs;
import org.apache.hadoop.fs.DelegateToFileSystem;
import org.apache.hadoop.fs.FsConstants;
import org.apache.hadoop.fs.FsServerDefaults;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.RawLocalFileSystem;
import org.apache.hadoop.fs.local.LocalConfigKeys;
import org.apache.hadoop.fs.permission.FsPermission;

/**
 * Hadoop's local file system for {@code FileContext} ({@code LocalFs}), but setting a file's
 * permissions in Java: without Hadoop's native library, which a real cluster's nodes have and this
 * machine does not, {@code RawLocalFileSystem} starts a {@code chmod} process for each, and a
 * NodeManager started 19 for every container it launched, 18 of them through this file system (its
 * directories, scripts, token files and their checksums), one after another on the container's way
 * to its start. {@link LocalYarn} makes this its JVM's local file system for {@code FileContext}.
 */
public final class JavaPermissionsLocalFs extends ChecksumFs {

  /** What Hadoop calls for {@code fs.AbstractFileSystem.file.impl}; {@code uri} is always {@code file:///}. */
  public JavaPermissionsLocalFs(URI uri, Configuration conf) throws IOException, URISyntaxException {
    super(new Raw(conf));
  }

  /** What {@code RawLocalFs} is, over {@link JavaPermissions}. */
  private static final class Raw extends DelegateToFileSystem {
    Raw(Configuration conf) throws IOException, URISyntaxException {
      super(FsConstants.LOCAL_FS_URI, new JavaPermissions(), conf, FsConstants.LOCAL_FS_URI.getScheme(), false);
    }

    @Override
    public int getUriDefaultPort() {
      return -1; // file: has no port
    }

    @Override
    public FsServerDefaults getServerDefaults(Path f) throws IOException {
      return LocalConfigKeys.getServerDefaults();
    }

    @Override
    @Deprecated
    public FsServerDefaults getServerDefaults() throws IOException {
      return LocalConfigKeys.getServerDefaults();
    }

    @Override
    public boolean isValidName(String src) {
      return true; // any local path
    }
  }

  /** {@code RawLocalFileSystem} with {@link #setPermission} in Java where Java can say it (no sticky bit). */
  private static final class JavaPermissions extends RawLocalFileSystem {
    @Override
    public void setPermission(Path p, FsPermission permission) throws IOException {
      if (permission.getStickyBit()) {
        super.setPermission(p, permission);
        return;
      }
      Files.setPosixFilePermissions(pathToFile(p).toPath(), PosixFilePermissions.fromString(
          permission.getUserAction().SYMBOL + permission.getGroupAction().SYMBOL + permission.getOtherAction().SYMBOL));
    }
  }
}
