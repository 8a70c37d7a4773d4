package io.muster.collective;

import io.muster.cluster.HostPort;
import java.io.ByteArrayInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.Socket;
import java.net.SocketTimeoutException;
import java.nio.ByteBuffer;
import java.nio.channels.SocketChannel;
import java.util.concurrent.TimeUnit;
import javax.net.ssl.SSLContext;
import javax.net.ssl.SSLException;
import javax.net.ssl.SSLParameters;
import javax.net.ssl.SSLSocket;

/**
 * One of a ring's two TCP streams: the socket itself, or TLS over it. While the ring is set up it
 * is a blocking stream ({@link #in()}, {@link #out()}); {@link #start} turns it into the data
 * plane's non-blocking one: {@link #write} and {@link #read} move what they can at once and
 * return 0 when they can move nothing, so that one thread can keep both streams of a ring busy.
 *
 * <p>Plain streams move bytes straight between the caller's buffers and the socket (a direct
 * buffer is never copied); a read that waits is a blocking read, the cheapest way to sleep until
 * bytes come (the socket is switched to blocking for it). TLS streams go through the
 * JDK's {@link SSLSocket}, which blocks and works on arrays: two pump threads move bytes between
 * it and a bounded buffer each way, and wake the ring's thread when they have moved some.
 *
 * <p>TLS is layered over the socket channel's own socket, so a blocked read or write still ends
 * when the socket is shut down or closed, as on a plain stream; the layer does not own the socket
 * (at the peer's end of stream it would close it, and a close with bytes unread resets the
 * connection, which names the wrong rank as the one that failed). The data plane frames every
 * message with its length, so a stream cut short is noticed without TLS's close_notify;
 * {@link #close} therefore closes the socket without sending one (sending it could wait behind a
 * write that the peer has stopped reading).
 */
final class RingStream {

  private static final int PUMP_BYTES = 64 << 10;
  private static final int PUMP_BUFFER_BYTES = 1 << 20;
  private static final java.time.Duration CLOSE_FLUSH = java.time.Duration.ofSeconds(2);

  private final SocketChannel socket;
  private final SSLSocket tls;
  private final InputStream in;
  private final OutputStream out;
  /** TLS only, once started: the bytes between the ring's thread and the pump thread. */
  private Pump pump;
  private boolean outbound;

  private RingStream(SocketChannel socket, SSLSocket tls) throws IOException {
    this.socket = socket;
    this.tls = tls;
    this.in = tls == null ? socket.socket().getInputStream() : tls.getInputStream();
    this.out = tls == null ? socket.socket().getOutputStream() : tls.getOutputStream();
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

  /**
   * Turns the set-up stream into the data plane's non-blocking one, written ({@code outbound}) or
   * read; {@code wake} is called from a pump thread when a TLS stream has moved bytes.
   */
  void start(boolean outbound, String threadName, Runnable wake) throws IOException {
    this.outbound = outbound;
    if (tls == null) {
      socket.configureBlocking(false);
    } else {
      pump = outbound ? new Pump(threadName, wake, this::pumpOut) : new Pump(threadName, wake, this::pumpIn);
    }
  }

  /** Writes what it can of {@code buffers} at once, in order; 0 when it can write nothing now. */
  long write(ByteBuffer[] buffers) throws IOException {
    return tls == null ? socket.write(buffers) : pump.offer(buffers);
  }

  /**
   * Reads what has arrived into {@code buffers}, in order; 0 when nothing has, -1 at the end of the
   * stream. With {@code block}, waits until something arrives, the stream ends (as it does when
   * its input is shut down), or the thread is interrupted.
   */
  long read(ByteBuffer[] buffers, boolean block) throws IOException {
    if (tls != null) {
      return pump.take(buffers, block);
    }
    if (!block) {
      return socket.read(buffers);
    }
    socket.configureBlocking(true);
    try {
      return socket.read(buffers);
    } finally {
      if (socket.isOpen()) {
        socket.configureBlocking(false);
      }
    }
  }

  /**
   * Waits, until {@code deadlineNanos} at most, for the bytes written so far to reach the socket:
   * at once on a plain stream, whose writes go straight to it.
   */
  void flush(long deadlineNanos) throws InterruptedException {
    if (pump != null) {
      pump.awaitDrained(deadlineNanos);
    }
  }

  /** The TLS pump thread's loop for the stream that is written: the buffer's bytes to the socket. */
  private void pumpOut(Pump p) throws IOException, InterruptedException {
    byte[] array = new byte[PUMP_BYTES];
    while (true) {
      int n = p.drain(array);
      try {
        out.write(array, 0, n);
      } catch (SSLException e) {
        throw socketError(e);
      }
      p.written();
    }
  }

  /** The TLS pump thread's loop for the stream that is read: the socket's bytes to the buffer. */
  private void pumpIn(Pump p) throws IOException, InterruptedException {
    byte[] array = new byte[PUMP_BYTES];
    while (true) {
      int n;
      try {
        n = in.read(array, 0, array.length);
      } catch (SSLException e) {
        throw socketError(e);
      }
      if (n < 0) {
        p.end(null);
        return;
      }
      p.fill(array, n);
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

  /**
   * Closes the socket; a TLS stream that is written first lets its pump write out, for up to
   * {@link #CLOSE_FLUSH}, what the last collective handed it (that collective has returned, and its
   * peer is still reading).
   */
  void close() throws IOException {
    close(false);
  }

  /**
   * As {@link #close}, and a written TLS stream then ends its output and waits, within the same
   * {@link #CLOSE_FLUSH}, for the peer to close its end, dropping what the peer sends meanwhile:
   * TLS 1.3's answers to key updates (the JDK asks for one every 2^37 bytes). A socket closed
   * with bytes unread resets the connection, and the reset loses what is still on its way to the
   * peer. The end of a ring, whose ranks close their read streams first.
   */
  void closeAfterPeer() throws IOException {
    close(true);
  }

  private void close(boolean afterPeer) throws IOException {
    long deadline = System.nanoTime() + CLOSE_FLUSH.toNanos();
    try {
      if (pump != null && outbound) {
        flush(deadline);
        if (afterPeer) {
          awaitPeerClose(deadline);
        }
      }
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
    try {
      socket.close();
    } finally {
      if (pump != null) {
        pump.thread.interrupt();
      }
    }
  }

  /** Ends the output, then drops what arrives until the peer closes its end or the deadline passes. */
  private void awaitPeerClose(long deadlineNanos) throws IOException {
    socket.shutdownOutput(); // after the bytes written so far; no close_notify (see the class comment)
    Socket raw = socket.socket();
    InputStream in = raw.getInputStream();
    byte[] dropped = new byte[4096];
    while (true) {
      long left = TimeUnit.NANOSECONDS.toMillis(deadlineNanos - System.nanoTime());
      if (left <= 0) {
        return;
      }
      raw.setSoTimeout((int) left);
      try {
        if (in.read(dropped) < 0) {
          return;
        }
      } catch (SocketTimeoutException e) {
        return;
      }
    }
  }

  /**
   * A bounded byte buffer between the ring's thread and one pump thread, with the pump's end: the
   * end of the stream, or the error that ended it, seen by the ring's thread once the bytes before
   * it are taken.
   */
  private static final class Pump {
    interface Loop {
      void run(Pump pump) throws IOException, InterruptedException;
    }

    private final ByteBuffer bytes = ByteBuffer.allocate(PUMP_BUFFER_BYTES); // in write mode
    private final Runnable wake;
    private final Thread thread;
    private boolean ended;
    private IOException error;
    /** Written stream: bytes taken from the buffer that the pump is still writing to the socket. */
    private boolean writing;

    Pump(String threadName, Runnable wake, Loop loop) {
      this.wake = wake;
      this.thread = new Thread(() -> {
        try {
          loop.run(this);
        } catch (IOException e) {
          end(e);
        } catch (InterruptedException e) {
          end(new java.nio.channels.ClosedChannelException());
        }
      }, threadName);
      thread.setDaemon(true);
      thread.start();
    }

    synchronized void end(IOException cause) {
      ended = true;
      error = cause;
      notifyAll();
      wake.run();
    }

    /** Ring's side of the written stream: copies what fits. */
    synchronized long offer(ByteBuffer[] buffers) throws IOException {
      if (ended) {
        throw error != null ? error : new java.nio.channels.ClosedChannelException();
      }
      long n = 0;
      for (ByteBuffer buffer : buffers) {
        n += move(buffer, bytes);
      }
      if (n > 0) {
        notifyAll();
      }
      return n;
    }

    /** Copies what fits of {@code from}'s remaining bytes into {@code to}, advancing both; how many. */
    private static int move(ByteBuffer from, ByteBuffer to) {
      int k = Math.min(from.remaining(), to.remaining());
      to.put(to.position(), from, from.position(), k).position(to.position() + k);
      from.position(from.position() + k);
      return k;
    }

    /** Pump's side of the written stream: waits for bytes and takes up to {@code array}'s length. */
    synchronized int drain(byte[] array) throws InterruptedException {
      while (bytes.position() == 0) {
        wait();
      }
      bytes.flip();
      int n = Math.min(array.length, bytes.remaining());
      bytes.get(array, 0, n).compact();
      writing = true;
      wake.run();
      return n;
    }

    synchronized void written() {
      writing = false;
      notifyAll();
    }

    synchronized void awaitDrained(long deadlineNanos) throws InterruptedException {
      while ((bytes.position() > 0 || writing) && !ended) {
        long left = deadlineNanos - System.nanoTime();
        if (left <= 0) {
          return;
        }
        TimeUnit.NANOSECONDS.timedWait(this, left);
      }
    }

    /** Pump's side of the read stream: waits for room and adds {@code n} bytes of {@code array}. */
    synchronized void fill(byte[] array, int n) throws InterruptedException {
      for (int at = 0; at < n; ) {
        while (!bytes.hasRemaining()) {
          wait();
        }
        int k = Math.min(n - at, bytes.remaining());
        bytes.put(array, at, k);
        at += k;
        notifyAll();
        wake.run();
      }
    }

    /**
     * Ring's side of the read stream: takes what has arrived, waiting for it with {@code block};
     * -1 (or the error) once all is taken and the pump has ended.
     */
    synchronized long take(ByteBuffer[] buffers, boolean block) throws IOException {
      while (block && bytes.position() == 0 && !ended) {
        try {
          wait();
        } catch (InterruptedException e) {
          Thread.currentThread().interrupt();
          throw new java.nio.channels.ClosedByInterruptException();
        }
      }
      if (bytes.position() == 0) {
        if (!ended) {
          return 0;
        }
        if (error != null) {
          throw error;
        }
        return -1;
      }
      bytes.flip();
      long n = 0;
      for (ByteBuffer buffer : buffers) {
        n += move(bytes, buffer);
      }
      bytes.compact();
      notifyAll();
      return n;
    }
  }
}
