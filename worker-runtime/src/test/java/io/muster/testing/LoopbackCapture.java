package io.muster.testing;

import java.io.BufferedInputStream;
import java.io.BufferedReader;
import java.io.ByteArrayOutputStream;
import java.io.DataInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.TimeUnit;

/**
 * What crosses the loopback interface while a test runs, captured by a real packet socket (a
 * Python child process, as root): the TCP connections, each with the bytes each side sent and the
 * protocol it speaks. For tests that show what a job sends in clear.
 */
public final class LoopbackCapture implements AutoCloseable {

  /** One TCP connection on loopback: the bytes each side sent, in the order captured. */
  public record Connection(int port, int otherPort, byte[] fromPort, byte[] fromOtherPort) {
    /**
     * What it speaks, from what either side opened with (a server may send first, as an HTTP/2
     * server's settings can): {@code http2} (gRPC in clear), {@code hadoop-ipc}, {@code tls}, or {@code other}.
     */
    public String protocol() {
      return opens(fromPort, "PRI * HTTP/2.0") || opens(fromOtherPort, "PRI * HTTP/2.0") ? "http2"
          : opens(fromPort, "hrpc") || opens(fromOtherPort, "hrpc") ? "hadoop-ipc"
          : isTls(fromPort) && isTls(fromOtherPort) ? "tls" : "other";
    }

    /** Whether either side sent {@code text}'s bytes. */
    public boolean carries(String text) {
      byte[] needle = text.getBytes(StandardCharsets.UTF_8);
      return indexOf(fromPort, needle) >= 0 || indexOf(fromOtherPort, needle) >= 0;
    }

    @Override
    public String toString() {
      return port + " <-> " + otherPort + " (" + protocol() + ", " + fromPort.length + "/" + fromOtherPort.length
          + " bytes)";
    }

    private static boolean opens(byte[] bytes, String text) {
      return new String(bytes, 0, Math.min(bytes.length, text.length()), StandardCharsets.ISO_8859_1).equals(text);
    }

    /** A TLS handshake record first. */
    private static boolean isTls(byte[] bytes) {
      return bytes.length > 2 && bytes[0] == 0x16 && bytes[1] == 0x03;
    }
  }

  private final Process process;
  private final BufferedReader output;
  private final Path file;

  private LoopbackCapture(Process process, BufferedReader output, Path file) {
    this.process = process;
    this.output = output;
    this.file = file;
  }

  /** Why no capture can run here (not root, no python3), or empty when one can. */
  public static Optional<String> unavailable() {
    if (!"root".equals(System.getProperty("user.name"))) {
      return Optional.of("capturing loopback needs root (a packet socket), and this runs as "
          + System.getProperty("user.name"));
    }
    try {
      Process p = new ProcessBuilder("python3", "--version").redirectErrorStream(true).start();
      p.getInputStream().readAllBytes();
      return p.waitFor(30, TimeUnit.SECONDS) && p.exitValue() == 0 ? Optional.empty()
          : Optional.of("python3 does not run here");
    } catch (IOException | InterruptedException e) {
      return Optional.of("no python3 to capture loopback with: " + e.getMessage());
    }
  }

  /** Starts capturing into {@code dir}, for {@code limit} at most; returns once the capture is ready. */
  public static LoopbackCapture start(Path dir, Duration limit) throws IOException {
    Path script = dir.resolve("loopback_capture.py");
    try (InputStream in = LoopbackCapture.class.getResourceAsStream("loopback_capture.py")) {
      Files.write(script, in.readAllBytes());
    }
    Path file = dir.resolve("loopback.capture");
    Process process = new ProcessBuilder("python3", script.toString(), file.toString(),
        Long.toString(limit.toSeconds())).redirectErrorStream(true).start();
    BufferedReader out = new BufferedReader(new InputStreamReader(process.getInputStream(), StandardCharsets.UTF_8));
    String first = out.readLine();
    if (!"capturing".equals(first)) {
      process.destroyForcibly();
      throw new IOException("the loopback capture did not start: " + first);
    }
    return new LoopbackCapture(process, out, file);
  }

  /**
   * Stops the capture and returns the connections it saw, in the order they were first seen.
   *
   * @throws IOException when the kernel dropped frames the capture could not take in time: what it
   *     returns would be incomplete, and a test could miss what crossed in clear
   */
  public List<Connection> stop() throws IOException, InterruptedException {
    close();
    String dropped = output.readLine();
    if (!"dropped 0".equals(dropped)) {
      throw new IOException("the loopback capture is incomplete: " + dropped + " frames");
    }
    Map<List<Integer>, ByteArrayOutputStream[]> flows = new LinkedHashMap<>();
    try (DataInputStream in = new DataInputStream(new BufferedInputStream(Files.newInputStream(file)))) {
      while (in.available() > 0) {
        int source = in.readUnsignedShort();
        int destination = in.readUnsignedShort();
        byte[] payload = in.readNBytes(in.readUnsignedShort());
        List<Integer> key = List.of(Math.min(source, destination), Math.max(source, destination));
        ByteArrayOutputStream[] both = flows.computeIfAbsent(key, k -> new ByteArrayOutputStream[] {
            new ByteArrayOutputStream(), new ByteArrayOutputStream()});
        both[source == key.get(0) ? 0 : 1].writeBytes(payload);
      }
    }
    List<Connection> connections = new ArrayList<>();
    flows.forEach((key, both) -> connections.add(new Connection(key.get(0), key.get(1), both[0].toByteArray(),
        both[1].toByteArray())));
    return connections;
  }

  @Override
  public void close() throws InterruptedException {
    if (process.isAlive()) {
      process.toHandle().destroy(); // SIGTERM: the script closes its file (Process.destroy would close its output)
      if (!process.waitFor(10, TimeUnit.SECONDS)) {
        process.destroyForcibly().waitFor();
      }
    }
  }

  private static int indexOf(byte[] haystack, byte[] needle) {
    outer:
    for (int i = 0; i + needle.length <= haystack.length; i++) {
      for (int j = 0; j < needle.length; j++) {
        if (haystack[i + j] != needle[j]) {
          continue outer;
        }
      }
      return i;
    }
    return -1;
  }
}
