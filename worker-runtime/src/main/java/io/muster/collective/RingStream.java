package io.muster.collective;

import io.muster.cluster.HostPort;
import java.io.ByteArrayInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.nio.ByteBuffer;
import java.nio.channels.SocketChannel;
import javax.net.ssl.SSLContext;
import javax.net.ssl.SSLException;
import javax.net.ssl.SSLParameters;
import javax.net.ssl.SSLSocket;

/**
 * One of a ring's two TCP streams: the socket itself, or TLS over it. Plain streams move bytes
 * straight between the caller's buffers and the socket (a direct buffer is never copied); TLS
 * streams go through the JDK's {@link SSLSocket}, which encrypts from and decrypts into arrays, so
 * their bytes pass through a staging array on the way.
 *
 * <p>TLS is layered over the socket channel's own socket, so a blocked read or write still ends
 * when its thread is interrupted or the socket is shut down or closed, as on a plain stream; the
 * layer does not own the socket (at the peer's end of stream it would close it, and a close with
 * bytes unread resets the connection, which names the wrong rank as the one that failed). The
 * data plane frames every message with its length, so a stream cut short is noticed without TLS's
 * close_notify; {@link #close} therefore closes the socket without sending one (sending it could
 * wait behind a write that the peer has stopped reading).
 */
final class RingStream {

  private static final int STAGING_BYTES = 64 << 10;

  private final SocketChannel socket;
  private final SSLSocket tls;
  private final InputStream in;
  private final OutputStream out;
  /** TLS only; a stream is either written or read once set up, so one array serves it. */
  private final byte[] staging;

  private RingStream(SocketChannel socket, SSLSocket tls) throws IOException {
    this.socket = socket;
    this.tls = tls;
    this.in = tls == null ? socket.socket().getInputStream() : tls.getInputStream();
    this.out = tls == null ? socket.socket().getOutputStream() : tls.getOutputStream();
    this.staging = tls == null ? null : new byte[STAGING_BYTES];
  }

  static RingStream plain(SocketChannel socket) throws IOException {
    return new RingStream(socket, null);
  }

  /**
   * TLS as the client: verifies that the peer's certificate is trusted and names {@code server}'s
   * host, as gRPC does. The handshake runs within the socket's read timeout.
   */
  static RingStream tlsClient(SocketChannel socket, SSLContext context, HostPort server) throws IOException {
    SSLSocket tls = (SSLSocket) context.getSocketFactory().createSocket(socket.socket(), server.host(), server.port(), false);
    SSLParameters parameters = tls.getSSLParameters();
    parameters.setEndpointIdentificationAlgorithm("HTTPS");
    tls.setSSLParameters(parameters);
    tls.startHandshake();
    return new RingStream(socket, tls);
  }

  /**
   * TLS as the server, with the certificate the task server serves with; as on gRPC, the client
   * is not asked for a certificate (it proves itself with the job token, inside TLS).
   * {@code consumed} are the first bytes already read from the socket.
   */
  static RingStream tlsServer(SocketChannel socket, SSLContext context, byte[] consumed) throws IOException {
    SSLSocket tls = (SSLSocket) context.getSocketFactory()
        .createSocket(socket.socket(), new ByteArrayInputStream(consumed), false);
    tls.setUseClientMode(false);
    tls.startHandshake();
    return new RingStream(socket, tls);
  }

  /** Blocking stream for the set-up handshake (times out with the socket's read timeout). */
  InputStream in() {
    return in;
  }

  OutputStream out() {
    return out;
  }

  /** Writes some bytes from {@code buffers} in order, as {@link SocketChannel#write(ByteBuffer[])}. */
  long write(ByteBuffer[] buffers) throws IOException {
    if (tls == null) {
      return socket.write(buffers);
    }
    byte[] array = staging;
    int n = 0;
    for (ByteBuffer buffer : buffers) {
      int k = Math.min(buffer.remaining(), array.length - n);
      buffer.get(array, n, k);
      n += k;
    }
    try {
      out.write(array, 0, n);
    } catch (SSLException e) {
      throw socketError(e);
    }
    return n;
  }

  /** Reads some bytes into {@code buffers} in order, never past their limits; -1 at the end of the stream. */
  long read(ByteBuffer[] buffers) throws IOException {
    if (tls == null) {
      return socket.read(buffers);
    }
    long room = 0;
    for (ByteBuffer buffer : buffers) {
      room += buffer.remaining();
    }
    byte[] array = staging;
    int n = tlsRead(array, (int) Math.min(room, array.length));
    for (int at = 0, i = 0; at < n; i++) {
      int k = Math.min(buffers[i].remaining(), n - at);
      buffers[i].put(array, at, k);
      at += k;
    }
    return n;
  }

  int read(ByteBuffer buffer) throws IOException {
    if (tls == null) {
      return socket.read(buffer);
    }
    byte[] array = staging;
    int n = tlsRead(array, Math.min(buffer.remaining(), array.length));
    if (n > 0) {
      buffer.put(array, 0, n);
    }
    return n;
  }

  private int tlsRead(byte[] array, int length) throws IOException {
    try {
      return in.read(array, 0, length);
    } catch (SSLException e) {
      throw socketError(e);
    }
  }

  /**
   * The socket's own error (a reset, an interrupt) when TLS only wrapped it, so that a failure
   * reads as it does on a plain stream; otherwise the TLS error itself.
   */
  private static IOException socketError(SSLException e) {
    for (Throwable t = e.getCause(); t != null; t = t.getCause()) {
      if (t instanceof IOException io && !(t instanceof SSLException)) {
        return io;
      }
    }
    return e;
  }

  /** Stops reading without resetting the connection; a blocked read ends with the end of the stream. */
  void shutdownInput() throws IOException {
    socket.shutdownInput();
  }

  void close() throws IOException {
    socket.close();
  }
}
