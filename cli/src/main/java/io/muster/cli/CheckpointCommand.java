package io.muster.cli;

import io.muster.checkpoint.Bundle;
import io.muster.checkpoint.BundleReader;
import io.muster.checkpoint.CheckpointManager;
import io.muster.checkpoint.Tensor;
import io.muster.proto.tf.BundleEntryProto;
import io.muster.proto.tf.CheckpointState;
import io.muster.proto.tf.TensorShapeProto;
import java.io.IOException;
import java.io.PrintStream;
import java.io.UncheckedIOException;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.stream.Collectors;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;

/**
 * {@code muster checkpoint ls DIR}: the checkpoints the state file lists, which is the latest, and
 * one line per tensor of the latest (name, dtype, shape). {@code muster checkpoint verify DIR
 * [PREFIX]}: reads every tensor of the latest checkpoint (or of {@code PREFIX}, a name in
 * {@code DIR} such as {@code ckpt-3}) and checks its CRC32C; exit 0 with a summary line when all
 * match, 1 naming each corrupt tensor. Both work on directories TensorFlow wrote.
 */
final class CheckpointCommand {
  static final String USAGE = "usage: muster checkpoint ls DIR | muster checkpoint verify DIR [PREFIX]"
      + "   (DIR: a local path or any Hadoop URI, e.g. hdfs://nn/ckpt; PREFIX: ckpt-3, the latest by default)";

  private CheckpointCommand() {}

  static int run(List<String> args, PrintStream out, PrintStream err) {
    if (args.equals(List.of("--help"))) {
      out.println(USAGE);
      return 0;
    }
    if (args.size() >= 2 && args.size() <= 3 && args.get(0).equals("verify")) {
      return verify(new Path(args.get(1)), args.size() == 3 ? Optional.of(args.get(2)) : Optional.empty(), out, err);
    }
    if (args.size() != 2 || !args.get(0).equals("ls")) {
      throw new UsageException(USAGE);
    }
    Path dir = new Path(args.get(1));
    try {
      FileSystem fs = dir.getFileSystem(new Configuration());
      dir = fs.makeQualified(dir);
      Optional<CheckpointState> state = validState(fs, dir);
      if (state.isEmpty()) {
        throw new UsageException("no checkpoint state file in " + dir + " (expected " + new Path(dir, "checkpoint") + ")");
      }
      Optional<Path> latest = CheckpointManager.latestCheckpoint(fs, dir);
      for (String listed : state.get().getAllModelCheckpointPathsList()) {
        Path prefix = new Path(listed).isAbsolute() ? new Path(listed) : new Path(dir, listed);
        boolean complete = fs.exists(Bundle.indexFile(prefix));
        out.println(listed + (latest.filter(prefix::equals).isPresent() ? "  (latest)" : "")
            + (complete ? "" : "  (missing)"));
      }
      if (latest.isEmpty()) {
        out.println("no complete checkpoint");
        return 1;
      }
      out.println();
      out.println("tensors of " + latest.get().getName() + ":");
      for (Map.Entry<String, BundleEntryProto> e : BundleReader.open(fs, latest.get()).entries().entrySet()) {
        out.println(e.getKey() + "  " + Tensor.dtypeName(e.getValue().getDtype()) + "  " + shape(e.getValue().getShape()));
      }
      return 0;
    } catch (IOException e) {
      throw new UncheckedIOException("cannot list " + dir + ": " + e.getMessage(), e);
    }
  }

  private static int verify(Path given, Optional<String> name, PrintStream out, PrintStream err) {
    try {
      FileSystem fs = given.getFileSystem(new Configuration());
      if (!fs.exists(given)) {
        throw new UsageException(given + " does not exist");
      }
      Path dir = fs.makeQualified(given);
      Path prefix;
      if (name.isPresent()) {
        prefix = new Path(name.get()).isAbsolute() ? new Path(name.get()) : new Path(dir, name.get());
        if (!fs.exists(Bundle.indexFile(prefix))) {
          throw new UsageException("no checkpoint " + name.get() + " in " + dir + " (" + Bundle.indexFile(prefix)
              + " does not exist); muster checkpoint ls " + dir + " lists them");
        }
      } else {
        validState(fs, dir);
        String none = "no complete checkpoint in " + dir + " to verify";
        prefix = CheckpointManager.latestCheckpoint(fs, dir)
            .orElseThrow(() -> new UncheckedIOException(none, new IOException(none)));
      }
      BundleReader.Verification result = BundleReader.open(fs, prefix).verify();
      if (result.intact()) {
        out.println(prefix.getName() + ": " + result.tensors() + " tensors, " + result.bytes()
            + " bytes, every CRC32C matches");
        return 0;
      }
      err.println("muster checkpoint verify: " + prefix.getName() + " is corrupt: " + result.damaged().size() + " of "
          + result.tensors() + " tensors do not read back intact: "
          + result.damaged().stream().map(BundleReader.Damage::tensor).collect(Collectors.joining(", ")));
      for (BundleReader.Damage d : result.damaged()) {
        err.println("  " + d.tensor() + ": " + d.problem());
      }
      return 1;
    } catch (IOException e) {
      throw new UncheckedIOException("cannot verify a checkpoint in " + given + ": " + e.getMessage(), e);
    }
  }

  /**
   * The directory's state file: a file given for the directory is a usage error; a state file that
   * does not parse is a failure naming it (exit 1), not a directory without one.
   */
  private static Optional<CheckpointState> validState(FileSystem fs, Path dir) throws IOException {
    if (fs.exists(dir) && fs.getFileStatus(dir).isFile()) {
      throw new UsageException(dir + " is a file; give the checkpoint directory (the one holding the 'checkpoint' "
          + "state file)");
    }
    try {
      return CheckpointManager.readValidState(fs, dir);
    } catch (CheckpointManager.InvalidStateException e) {
      throw new UncheckedIOException(e.getMessage() + "; it is not TensorFlow's checkpoint state file", e);
    }
  }

  static String shape(TensorShapeProto shape) {
    return shape.getDimList().stream().map(d -> String.valueOf(d.getSize())).collect(Collectors.joining(", ", "[", "]"));
  }
}
