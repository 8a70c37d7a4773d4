package io.muster.rpc;

import io.muster.cluster.HostPort;
import java.io.IOException;
import java.net.ConnectException;
import java.net.InetSocketAddress;
import java.net.NoRouteToHostException;
import java.net.Socket;
import java.net.SocketTimeoutException;
import java.net.UnknownHostException;
import java.time.Duration;

/**
 * Why a peer might be missing, in words: tries a TCP connection to its address and reports what
 * happened ({@code connection refused}, {@code unknown host}, ...). Used to explain a wait, never
 * to decide anything.
 */
public final class Reachability {

  private Reachability() {}

  /** One TCP connection attempt, closed at once; returns {@code "listening"} when it connects. */
  public static String probe(HostPort peer, Duration timeout) {
    try (Socket socket = new Socket()) {
      socket.connect(new InetSocketAddress(peer.host(), peer.port()), (int) timeout.toMillis());
      return "listening";
    } catch (UnknownHostException e) {
      return "unknown host '" + peer.host() + "'";
    } catch (ConnectException e) {
      return "connection refused";
    } catch (SocketTimeoutException e) {
      return "no answer within " + timeout.toMillis() + " ms";
    } catch (NoRouteToHostException e) {
      return "no route to host";
    } catch (IOException | IllegalArgumentException e) {
      return String.valueOf(e.getMessage());
    }
  }
}
