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

  /** What a probe found; its words are its {@code toString()}. */
  public sealed interface Answer permits Listening, NoAnswer, Stranger {
    /** Whether nothing answered at all in time: the host is down or cut off. */
    default boolean silent() {
      return this instanceof NoAnswer no && no.silent();
    }
  }

  /** Something listens there (and, for {@link #identify}, answers gRPC's HTTP/2 greeting). */
  public record Listening() implements Answer {
    @Override
    public String toString() {
      return "listening";
    }
  }

  /**
   * Nothing answered as it should: {@code why} ({@code connection refused}, {@code no answer within
   * 500 ms}, …); {@code silent} when not even the connection was answered in time, as with a host
   * down or cut off.
   */
  public record NoAnswer(String why, boolean silent) implements Answer {
    @Override
    public String toString() {
      return why;
    }
  }

  /** A program that is not a Muster task holds the port: {@code what} it answered. */
  public record Stranger(String what) implements Answer {
    @Override
    public String toString() {
      return "held by a program that is not a Muster task: " + what;
    }
  }

  /** One TCP connection attempt, closed at once: {@link Listening} when it connects. */
  public static Answer probe(HostPort peer, Duration timeout) {
    try (Socket socket = new Socket()) {
      socket.connect(new InetSocketAddress(peer.host(), peer.port()), (int) timeout.toMillis());
      return new Listening();
    } catch (IOException | IllegalArgumentException e) {
      return failed(e, peer, timeout);
    }
  }

  /** HTTP/2's client connection preface, then an empty SETTINGS frame: every HTTP/2 server answers with its SETTINGS. */
  private static final byte[] PREFACE = ("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n").getBytes(StandardCharsets.US_ASCII);
  private static final byte[] EMPTY_SETTINGS = {0, 0, 0, 4, 0, 0, 0, 0, 0};

  /**
   * As {@link #probe}, and when something listens, whether it speaks HTTP/2 as a task's gRPC server
   * does (a plaintext server; with TLS use {@link #probe}): {@link Listening} when it answers
   * HTTP/2, else a {@link Stranger} and what it answered ({@code it answered 'HTTP/1.1 400 Bad
   * Request'}) or that it closed the connection; one that keeps silent past the timeout is a
   * {@link NoAnswer} saying so, without a verdict.
   */
  public static Answer identify(HostPort peer, Duration timeout) {
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
          return new NoAnswer("listening, but it did not answer gRPC's HTTP/2 greeting within " + timeout.toMillis()
              + " ms (a task too busy to answer, or a program that is not a Muster task)", false);
        }
      } catch (IOException e) {
        if (got == 0) {
          return new Stranger("it closed the connection at gRPC's HTTP/2 greeting (" + e.getMessage() + ")");
        }
      }
      if (got == 0) {
        return new Stranger("it closed the connection at gRPC's HTTP/2 greeting without a word");
      }
      if (got >= 9 && answer[3] == 4 && (answer[4] & 1) == 0) { // a SETTINGS frame, not its acknowledgement
        return new Listening();
      }
      return new Stranger("it answered " + describe(answer, got) + " to gRPC's HTTP/2 greeting");
    } catch (IOException | IllegalArgumentException e) {
      return failed(e, peer, timeout);
    }
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
  private static NoAnswer failed(Exception e, HostPort peer, Duration timeout) {
    return new NoAnswer(e instanceof UnknownHostException ? "unknown host '" + peer.host() + "'"
        : e instanceof ConnectException ? "connection refused"
        : e instanceof SocketTimeoutException ? "no answer within " + timeout.toMillis() + " ms"
        : e instanceof NoRouteToHostException ? "no route to host"
        : String.valueOf(e.getMessage()), e instanceof SocketTimeoutException);
  }
}
