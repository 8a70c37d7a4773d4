package io.muster.cli;

import io.muster.summary.EventFiles;
import java.io.IOException;
import java.io.PrintStream;
import java.io.UncheckedIOException;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.LocatedFileStatus;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.RemoteIterator;

/**
 * {@code muster events FILE_OR_DIR}: one line per scalar, {@code step tag value}, from one event
 * file or every event file under a directory (each file's lines after a line naming it).
 *
 * <p>A file whose writer died mid-record is read as TensorBoard reads it: every intact record is
 * printed, then a warning on standard error, and the command still exits 0. A file that does not
 * begin with an event file's first record (the writer's {@code brain.Event:2}) is not one: one line
 * says so, and the command exits 1. A record that is
 * unreadable before the end (a CRC mismatch) is corruption: the records before it are printed,
 * then one line naming the file and offset, and the command exits 1 (after reading the other files).
 */
final class EventsCommand {
  private EventsCommand() {}

  static final String USAGE = "usage: muster events FILE_OR_DIR";

  static int run(List<String> args, PrintStream out, PrintStream err) {
    if (args.equals(List.of("--help"))) {
      out.println(USAGE);
      return 0;
    }
    if (args.size() != 1) {
      throw new UsageException(USAGE);
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
      int code = 0;
      for (Path file : files) {
        if (status.isDirectory()) {
          out.println("# " + file);
        }
        EventFiles.Contents contents = EventFiles.readIntact(fs, file);
        Optional<String> notEvents = notAnEventFile(contents);
        if (notEvents.isPresent()) {
          err.println("muster events: " + file + " is not a TensorFlow event file: " + notEvents.get());
          code = 1;
          continue;
        }
        for (EventFiles.Scalar s : contents.scalars()) {
          out.println(s.step() + "\t" + s.tag() + "\t" + s.value());
        }
        out.flush();
        if (contents.truncated()) {
          err.println("muster events: warning: " + contents.stop().get().getMessage() + "; the "
              + contents.events().size() + " intact records before it are shown");
        } else if (contents.corrupt()) {
          err.println("muster events: " + contents.stop().get().getMessage() + "; the " + contents.events().size()
              + " records before it are shown, the rest of the file is unreadable");
          code = 1;
        }
      }
      return code;
    } catch (java.io.FileNotFoundException e) {
      throw new UsageException(path + " does not exist");
    } catch (IOException e) {
      throw new UncheckedIOException(e.getMessage(), e);
    }
  }

  /** Why a file is no event file, if it is not: every event file begins with its writer's {@code brain.Event:N} record. */
  private static Optional<String> notAnEventFile(EventFiles.Contents contents) {
    if (contents.events().isEmpty()) {
      return Optional.of(contents.stop().map(e -> "its first record is unreadable (" + e.getMessage() + ")")
          .orElse("it is empty"));
    }
    return contents.events().get(0).getFileVersion().startsWith("brain.Event:") ? Optional.empty()
        : Optional.of("its first record is not the brain.Event file version every event file begins with");
  }
}
