package io.muster.internal.rpc;

import io.grpc.netty.shaded.io.netty.buffer.ByteBuf;
import io.grpc.netty.shaded.io.netty.channel.Channel;
import io.grpc.netty.shaded.io.netty.channel.ChannelHandlerContext;
import io.grpc.netty.shaded.io.netty.channel.ChannelInboundHandlerAdapter;
import io.grpc.netty.shaded.io.netty.channel.socket.nio.NioServerSocketChannel;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.SocketAddress;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.logging.Filter;
import java.util.logging.LogRecord;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Connections to a task's gRPC port that are not gRPC: a port scanner, a browser, a health check
 * speaking HTTP/1.1, a client without TLS on a TLS port, or one that connects and sends nothing.
 * gRPC's transport reports each with a stack trace and a hex dump of the bytes, in its own log
 * format; Muster instead looks at a connection's first bytes and logs one WARN line for it, at
 * most once per remote address per minute (with a count of those left out), and drops gRPC's own
 * report. A connection that sends nothing is closed by gRPC's handshake timeout and logged the
 * same way; one that connects and closes at once (a reachability probe) is not logged.
 */
final class Strangers {

  static final Duration LOG_INTERVAL = Duration.ofMinutes(1);
  /** HTTP/2's client connection preface, with which every plaintext gRPC connection opens. */
  private static final byte[] PREFACE = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".getBytes(StandardCharsets.US_ASCII);
  /** A TLS connection opens with a handshake record. */
  private static final int TLS_HANDSHAKE_RECORD = 22;
  /** More addresses than this, and entries older than the interval are dropped. */
  private static final int MAX_ADDRESSES = 1024;
  private static final Logger log = LoggerFactory.getLogger(Strangers.class);
  /** gRPC's logger for failed connections; held here, as java.util.logging keeps loggers weakly. */
  private static final java.util.logging.Logger GRPC_CONNECTIONS = java.util.logging.Logger.getLogger(
      "io.grpc.netty.shaded.io.grpc.netty.NettyServerTransport.connections");

  static {
    Filter previous = GRPC_CONNECTIONS.getFilter();
    GRPC_CONNECTIONS.setFilter(record -> !isTransportFailure(record) && (previous == null || previous.isLoggable(record)));
  }

  private volatile String server;
  private final boolean tls;
  private final Duration handshakeTimeout;
  private final Map<InetAddress, Window> windows = new ConcurrentHashMap<>();

  /** When an address was last logged, and how many of its connections were not since. */
  private static final class Window {
    long loggedNanos;
    int leftOut;
  }

  /** @param server the server in messages ({@code task worker 0 at 10.0.0.7:2222}) */
  Strangers(String server, boolean tls, Duration handshakeTimeout) {
    this.server = server;
    this.tls = tls;
    this.handshakeTimeout = handshakeTimeout;
  }

  /** Names the server in messages, once its port is bound. */
  void describeServer(String value) {
    server = value;
  }

  /**
   * gRPC's report of a failed connection: dropped from its log (a stranger was logged by
   * {@link Strangers} already; anything else is a peer's connection breaking, for which the calls
   * on it fail with their own errors), kept at DEBUG as one line.
   */
  private static boolean isTransportFailure(LogRecord record) {
    if (!"Transport failed".equals(record.getMessage())) {
      return false;
    }
    if (log.isDebugEnabled()) {
      Throwable t = record.getThrown();
      log.debug("gRPC transport failed: {}", t == null ? "(no cause)" : firstLine(t.toString()));
    }
    return true;
  }

  /** The server channel: every accepted connection gets a {@link FirstBytes} watch at the head of its pipeline. */
  NioServerSocketChannel newServerChannel() {
    return new NioServerSocketChannel() {
      @Override
      protected int doReadMessages(List<Object> accepted) throws Exception {
        int before = accepted.size();
        int n = super.doReadMessages(accepted);
        for (int i = before; i < accepted.size(); i++) {
          if (accepted.get(i) instanceof Channel child) {
            child.pipeline().addFirst("muster-first-bytes", new FirstBytes());
          }
        }
        return n;
      }
    };
  }

  /** Looks at a connection's first bytes, then steps out of the way. */
  private final class FirstBytes extends ChannelInboundHandlerAdapter {
    private final long openedNanos = System.nanoTime();
    private boolean sawBytes;

    @Override
    public void channelRead(ChannelHandlerContext ctx, Object msg) throws Exception {
      if (!sawBytes && msg instanceof ByteBuf bytes && bytes.isReadable()) {
        sawBytes = true;
        String stranger = describeIfStranger(bytes);
        ctx.pipeline().remove(this);
        if (stranger != null) {
          logged(ctx.channel().remoteAddress(), "does not speak gRPC" + (tls ? " over TLS" : "") + " (it began with "
              + stranger + ")");
        }
      }
      ctx.fireChannelRead(msg);
    }

    @Override
    public void channelInactive(ChannelHandlerContext ctx) throws Exception {
      long open = System.nanoTime() - openedNanos;
      if (!sawBytes && open >= handshakeTimeout.toNanos() * 9 / 10) {
        logged(ctx.channel().remoteAddress(), "sent nothing within the " + handshakeTimeout.toSeconds()
            + " s handshake timeout");
      }
      ctx.fireChannelInactive();
    }
  }

  /** Null when the bytes open a gRPC connection (so far); otherwise what they look like, in words. */
  private String describeIfStranger(ByteBuf bytes) {
    int at = bytes.readerIndex();
    if (tls) {
      return bytes.getUnsignedByte(at) == TLS_HANDSHAKE_RECORD ? null : quote(bytes);
    }
    int n = Math.min(bytes.readableBytes(), PREFACE.length);
    for (int i = 0; i < n; i++) {
      if (bytes.getByte(at + i) != PREFACE[i]) {
        return bytes.getUnsignedByte(at) == TLS_HANDSHAKE_RECORD ? "a TLS handshake: the client uses TLS, this "
            + "server does not; every task of a job needs the same MUSTER_TLS_* settings" : quote(bytes);
      }
    }
    return null;
  }

  /** Up to 24 of the bytes, printable ones as they are and the rest as dots. */
  private static String quote(ByteBuf bytes) {
    StringBuilder text = new StringBuilder("\"");
    int n = Math.min(bytes.readableBytes(), 24);
    for (int i = 0; i < n; i++) {
      int b = bytes.getUnsignedByte(bytes.readerIndex() + i);
      text.append(b >= 0x20 && b < 0x7f ? (char) b : '.');
    }
    return text.append(bytes.readableBytes() > n ? "…\"" : "\"").toString();
  }

  private void logged(SocketAddress remote, String what) {
    InetAddress address = remote instanceof InetSocketAddress inet ? inet.getAddress() : null;
    long now = System.nanoTime();
    int leftOut;
    if (address == null) {
      leftOut = 0;
    } else {
      if (windows.size() > MAX_ADDRESSES) {
        windows.values().removeIf(w -> now - w.loggedNanos > LOG_INTERVAL.toNanos());
      }
      Window window = windows.computeIfAbsent(address, a -> new Window());
      synchronized (window) {
        if (window.loggedNanos != 0 && now - window.loggedNanos < LOG_INTERVAL.toNanos()) {
          window.leftOut++;
          return;
        }
        leftOut = window.leftOut;
        window.loggedNanos = now;
        window.leftOut = 0;
      }
    }
    log.warn("{}: closed a connection from {} that {}{}; more from {} within a minute are not logged", server, remote,
        what, leftOut == 0 ? "" : " (and " + leftOut + " more from this address since the last such line)",
        address == null ? "it" : address.getHostAddress());
  }

  private static String firstLine(String text) {
    int newline = text.indexOf('\n');
    return newline < 0 ? text : text.substring(0, newline);
  }
}
