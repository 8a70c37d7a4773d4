package io.muster.bench;

import io.muster.cluster.ClusterSpec;
import java.io.IOException;
import java.net.ServerSocket;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

/** Benchmark child JVMs on this JVM's class path. */
final class Children {
  private Children() {}

  static Process start(Class<?> main, List<String> args, Map<String, String> env) throws IOException {
    List<String> command = new ArrayList<>(List.of(Path.of(System.getProperty("java.home"), "bin", "java").toString(),
        "-Xmx1g", "-XX:MaxDirectMemorySize=2g", "-cp", System.getProperty("java.class.path"), main.getName()));
    command.addAll(args);
    ProcessBuilder builder = new ProcessBuilder(command).redirectError(ProcessBuilder.Redirect.INHERIT);
    builder.environment().putAll(env);
    return builder.start();
  }

  /** N workers on free 127.0.0.1 ports: a benchmark-only shortcut, as the children need fixed ports up front. */
  static ClusterSpec localWorkers(int n) throws IOException {
    return ClusterSpec.of(Map.of("worker", freeAddresses(n)));
  }

  /** {@code n} distinct free 127.0.0.1 ports: every socket stays open until all are chosen, so none comes twice. */
  static List<String> freeAddresses(int n) throws IOException {
    List<ServerSocket> held = new ArrayList<>();
    try {
      List<String> addresses = new ArrayList<>();
      for (int i = 0; i < n; i++) {
        ServerSocket free = new ServerSocket(0);
        held.add(free);
        addresses.add("127.0.0.1:" + free.getLocalPort());
      }
      return addresses;
    } finally {
      for (ServerSocket socket : held) {
        socket.close();
      }
    }
  }
}
