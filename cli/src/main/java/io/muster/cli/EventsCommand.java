package io.muster.cli;

import io.muster.summary.EventFiles;
import java.io.IOException;
import java.io.PrintStream;
import java.io.UncheckedIOException;
import java.util.ArrayList;
import java.util.List;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.LocatedFileStatus;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.RemoteIterator;

/**
 * {@code muster events FILE_OR_DIR}: one line per scalar, {@code step tag value}, from one event
 * file or every event file under a directory (each file's lines after a line naming it).
 */
final class EventsCommand {
  private EventsCommand() {}

  static int run(List<String> args, PrintStream out) {
    if (args.size() != 1) {
      throw new UsageException("usage: muster events FILE_OR_DIR");
    }
    Path path = new Path(args.get(0));
    try {
      FileSystem fs = path.getFileSystem(new Configuration());
      FileStatus status = fs.getFileStatus(path);
      List<Path> files = new ArrayList<>();
      if (status.isDirectory()) {
        RemoteIterator<LocatedFileStatus> all = fs.listFiles(path, true);
        while (all.hasNext()) {
          Path p = all.next().getPath();
          if (p.getName().contains("tfevents")) {
            files.add(p);
          }
        }
        files.sort(null);
      } else {
        files.add(path);
      }
      if (files.isEmpty()) {
        throw new UsageException("no event files (events.out.tfevents.*) under " + path);
      }
      for (Path file : files) {
        if (status.isDirectory()) {
          out.println("# " + file);
        }
        for (EventFiles.Scalar s : EventFiles.scalars(fs, file)) {
          out.println(s.step() + "\t" + s.tag() + "\t" + s.value());
        }
      }
      return 0;
    } catch (java.io.FileNotFoundException e) {
      throw new UsageException(path + " does not exist");
    } catch (IOException e) {
      throw new UncheckedIOException(e.getMessage(), e);
    }
  }
}
