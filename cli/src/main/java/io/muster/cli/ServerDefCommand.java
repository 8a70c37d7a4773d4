package io.muster.cli;

import io.muster.internal.CommandOptions;
import com.google.protobuf.TextFormat;
import io.muster.cluster.ServerDefs;
import io.muster.proto.tf.ServerDef;
import java.io.IOException;
import java.io.PrintStream;
import java.io.UncheckedIOException;
import java.util.List;
import java.util.Map;
import java.util.Set;

/** {@code muster server-def [--text]}: the TensorFlow {@code ServerDef} for this task. */
final class ServerDefCommand {
  private ServerDefCommand() {}

  static int run(List<String> args, Map<String, String> env, PrintStream out) {
    CommandOptions options = CommandOptions.parse(args, Set.of(), Set.of("--text"));
    ServerDef def = ServerDefs.forTask(ClusterCommand.requireTfConfig(env));
    if (options.has("--text")) {
      out.print(TextFormat.printer().printToString(def));
    } else {
      try {
        def.writeTo(out);
      } catch (IOException e) {
        throw new UncheckedIOException(e);
      }
    }
    out.flush();
    return 0;
  }
}
