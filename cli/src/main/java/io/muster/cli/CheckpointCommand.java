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
 * one line per tensor of the latest (name, dtype, shape). Works on directories TensorFlow wrote.
 */
final class CheckpointCommand {
  private CheckpointCommand() {}

  static int run(List<String> args, PrintStream out) {
    if (args.size() != 2 || !args.get(0).equals("ls")) {
      throw new UsageException("usage: muster checkpoint ls DIR (a local path or any Hadoop URI, e.g. hdfs://nn/ckpt)");
    }
    Path dir = new Path(args.get(1));
    try {
      FileSystem fs = dir.getFileSystem(new Configuration());
      dir = fs.makeQualified(dir);
      Optional<CheckpointState> state = CheckpointManager.readState(fs, dir);
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
      throw new UncheckedIOException("muster checkpoint ls " + dir + ": " + e.getMessage(), e);
    }
  }

  static String shape(TensorShapeProto shape) {
    return shape.getDimList().stream().map(d -> String.valueOf(d.getSize())).collect(Collectors.joining(", ", "[", "]"));
  }
}
