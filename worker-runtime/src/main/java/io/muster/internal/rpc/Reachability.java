package io.muster.internal.rpc;

import io.muster.cluster.HostPort;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.nio.charset.StandardCharsets;
import java.util.HexFormat;
import java.net.ConnectException;
import java.net.InetSocketAddress;
import java.net.NoRouteToHostException;
import java.net.Socket;
import java.net.SocketTimeoutException;
import java.net.UnknownHostException;
import java.time.Duration;

/**
 * Why a peer might be missing, in words: tries a TCP connection to its address and reports what
 * happened ({@code connection refused}, {@code unknown host}, ...), and whether what listens there
 * speaks gRPC's HTTP/2 at all. Used to explain a wait or a failed call.
 */
public final class Reachability {

  private Reachability() {}

  /** One TCP connection attempt, closed at once; returns {@code "listening"} when it connects. */
  public static String probe(HostPort peer, Duration timeout) {
    try (Socket socket = new Socket()) {
      socket.connect(new InetSocketAddress(peer.host(), peer.port()), (int) timeout.toMillis());
      return "listening";
    } catch (IOException | IllegalArgumentException e) {
      return failed(e, peer, timeout);
    }
  }

  /** HTTP/2's client connection preface, then an empty SETTINGS frame: every HTTP/2 server answers with its SETTINGS. */
  private static final byte[] PREFACE = ("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n").getBytes(StandardCharsets.US_ASCII);
  private static final byte[] EMPTY_SETTINGS = {0, 0, 0, 4, 0, 0, 0, 0, 0};
  private static final String NOT_MUSTER = "held by a program that is not a Muster task: ";

  /**
   * As {@link #probe}, and when something listens, whether it speaks HTTP/2 as a task's gRPC server
   * does (a plaintext server; with TLS use {@link #probe}): {@code "listening"} when it answers
   * HTTP/2, else {@code "held by a program that is not a Muster task: "} and what it answered
   * ({@code it answered 'HTTP/1.1 400 Bad Request'}) or that it closed the connection; one that
   * keeps silent past the timeout is reported as such, without a verdict.
   */
  public static String identify(HostPort peer, Duration timeout) {
    try (Socket socket = new Socket()) {
      socket.connect(new InetSocketAddress(peer.host(), peer.port()), (int) timeout.toMillis());
      socket.setSoTimeout((int) timeout.toMillis());
      OutputStream out = socket.getOutputStream();
      out.write(PREFACE);
      out.write(EMPTY_SETTINGS);
      out.flush();
      byte[] answer = new byte[64];
      int got = 0;
      try {
        InputStream in = socket.getInputStream();
        for (int n; got < 9 && (n = in.read(answer, got, answer.length - got)) > 0; ) {
          got += n;
        }
      } catch (SocketTimeoutException e) {
        if (got == 0) { // a task too busy to answer in time looks the same: say no more than was seen
          return "listening, but it did not answer gRPC's HTTP/2 greeting within " + timeout.toMillis()
              + " ms (a task too busy to answer, or a program that is not a Muster task)";
        }
      } catch (IOException e) {
        if (got == 0) {
          return NOT_MUSTER + "it closed the connection at gRPC's HTTP/2 greeting (" + e.getMessage() + ")";
        }
      }
      if (got == 0) {
        return NOT_MUSTER + "it closed the connection at gRPC's HTTP/2 greeting without a word";
      }
      if (got >= 9 && answer[3] == 4 && (answer[4] & 1) == 0) { // a SETTINGS frame, not its acknowledgement
        return "listening";
      }
      return NOT_MUSTER + "it answered " + describe(answer, got) + " to gRPC's HTTP/2 greeting";
    } catch (IOException | IllegalArgumentException e) {
      return failed(e, peer, timeout);
    }
  }

  /** Whether a probe's answer says the port is held by something that is not a task's gRPC server. */
  public static boolean notAMusterTask(String probe) {
    return probe.startsWith(NOT_MUSTER);
  }

  /** The first line of a text answer, quoted; otherwise its first bytes in hex. */
  private static String describe(byte[] answer, int length) {
    int end = 0;
    while (end < length && answer[end] >= 0x20 && answer[end] < 0x7f) {
      end++;
    }
    if (end >= Math.min(length, 4) && (end == length || answer[end] == '\r' || answer[end] == '\n')) {
      return "'" + new String(answer, 0, end, StandardCharsets.US_ASCII) + (end == answer.length ? "…" : "") + "'";
    }
    return length + " bytes that are not HTTP/2 (" + HexFormat.ofDelimiter(" ").formatHex(answer, 0, Math.min(length, 12))
        + (length > 12 ? " …" : "") + ")";
  }

  /** What a failed connection attempt (or a failed exchange after it) says, in words. */
  private static String failed(Exception e, HostPort peer, Duration timeout) {
    if (e instanceof UnknownHostException) {
      return "unknown host '" + peer.host() + "'";
    }
    if (e instanceof ConnectException) {
      return "connection refused";
    }
    if (e instanceof SocketTimeoutException) {
      return "no answer within " + timeout.toMillis() + " ms";
    }
    if (e instanceof NoRouteToHostException) {
      return "no route to host";
    }
    return String.valueOf(e.getMessage());
  }
}
