package io.muster.collective;

import io.muster.cluster.HostPort;
import io.muster.cluster.TaskId;
import io.muster.coordination.KeyValues;
import io.muster.internal.Durations;
import io.muster.rpc.JobToken;
import io.muster.rpc.Security;
import io.muster.internal.rpc.TaskServer;
import io.muster.internal.rpc.TlsContexts;
import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.IOException;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.net.SocketTimeoutException;
import java.net.StandardSocketOptions;
import java.nio.ByteBuffer;
import java.nio.channels.ServerSocketChannel;
import java.nio.channels.SocketChannel;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import javax.net.ssl.SSLContext;
import javax.net.ssl.SSLException;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Opening one of a ring's streams: connecting to the next rank or accepting the previous one,
 * TLS first when configured, then the job-token handshake (magic, rank, token; answered with 0, or
 * 1 and the refusal in words). A stranger is refused and the accept goes on until the deadline; a
 * connection that has not completed the handshake within {@link #HANDSHAKE_TIMEOUT} (the task
 * server's, {@link TaskServer#HANDSHAKE_TIMEOUT}) is closed, so an idle one cannot hold the accept.
 */
final class RingSetup {

  static final int MAGIC = 0x4d555331; // "MUS1"
  static final Duration HANDSHAKE_TIMEOUT = TaskServer.HANDSHAKE_TIMEOUT;
  private static final Duration ANSWER_BEFORE_CLOSING = Duration.ofSeconds(2);
  private static final Logger log = LoggerFactory.getLogger(RingSetup.class);

  private RingSetup() {}

  /**
   * Binds a listening socket on {@code bindHost}, publishes its address under the group's key in
   * the coordination service, connects to the next rank and accepts the previous one; over TLS
   * when {@code security} has it. A rank polling for data yields its core when this group has more
   * ranks on this host than it has cores, or when {@code sharesCores} says the job has (a pair's
   * ring of two counts only its own).
   */
  static Ring connect(CollectiveGroup group, String groupName, String advertisedHost, InetSocketAddress bind,
      KeyValues agent, Security security, Duration timeout, boolean sharesCores) throws IOException {
    JobToken token = security.token();
    Optional<SSLContext> tls = security.tls().map(TlsContexts::of);
    TaskId self = group.self();
    TaskId prev = group.member(group.rank() - 1);
    TaskId next = group.member(group.rank() + 1);
    try (ServerSocketChannel server = ServerSocketChannel.open()) {
      server.bind(bind);
      int port = ((InetSocketAddress) server.getLocalAddress()).getPort();
      agent.insert(key(groupName, group.rank()), new HostPort(advertisedHost, port).toString()
          .getBytes(StandardCharsets.UTF_8), true);
      int nextRank = Math.floorMod(group.rank() + 1, group.size());
      HostPort nextAddress = address(agent, groupName, nextRank, timeout);
      CompletableFuture<RingStream> accepted = CompletableFuture.supplyAsync(() -> {
        try {
          return accept(server, group, prev, token, tls, timeout);
        } catch (IOException e) {
          throw new java.io.UncheckedIOException(e);
        }
      }, r -> new Thread(r, "muster-collective-accept-" + self.job() + "-" + self.index()).start());
      RingStream toNext;
      try {
        toNext = dial(nextAddress, group.rank(), next, token, tls, timeout);
      } catch (IOException e) {
        answerPreviousBeforeClosing(accepted);
        throw e;
      }
      RingStream fromPrev;
      try {
        fromPrev = accepted.get(timeout.toMillis() + 1000, TimeUnit.MILLISECONDS);
      } catch (Exception e) {
        toNext.close();
        Throwable cause = e instanceof java.util.concurrent.ExecutionException ? e.getCause() : e;
        throw new IOException(self + " could not accept the collective stream from " + prev + ": " + cause.getMessage(), cause);
      }
      try {
        // every rank has published its address by now, or is about to: it does so first
        int ranksOnHost = 1 + (nextAddress.host().equals(advertisedHost) ? 1 : 0); // this rank, and the next
        for (int r = 0; r < group.size(); r++) {
          if (r != group.rank() && r != nextRank) {
            ranksOnHost += address(agent, groupName, r, timeout).host().equals(advertisedHost) ? 1 : 0;
          }
        }
        Ring ring = new Ring(self, prev, next, toNext, fromPrev,
            sharesCores || ranksOnHost > Runtime.getRuntime().availableProcessors());
        log.info("{} collective ring ready: rank {} of {}, receiving from {}, sending to {} at {}{}", self,
            group.rank(), group.size(), prev, next, nextAddress, tls.isPresent() ? " (TLS)" : "");
        return ring;
      } catch (IOException | RuntimeException e) {
        toNext.close();
        fromPrev.close();
        throw e;
      }
    }
  }

  /**
   * A rank whose dial failed keeps accepting for a moment before it closes its port: the previous
   * rank, dialling at about the same time, then gets this rank's refusal in words (other TLS
   * settings, wrong token) instead of a bare "Connection refused".
   */
  private static void answerPreviousBeforeClosing(CompletableFuture<RingStream> accepted) {
    try {
      accepted.get(ANSWER_BEFORE_CLOSING.toMillis(), TimeUnit.MILLISECONDS).close();
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    } catch (Exception e) {
      // nothing accepted in time, or the accept failed: the port closes either way
    }
  }

  private static HostPort address(KeyValues agent, String group, int rank, Duration timeout) {
    return HostPort.parse(new String(agent.get(key(group, rank), timeout), StandardCharsets.UTF_8));
  }

  static String key(String group, int rank) {
    return "muster/collective/" + group + "/" + rank;
  }

  /** Connects to the next rank at {@code address} and is admitted by it, within the timeout. */
  static RingStream dial(HostPort address, int rank, TaskId next, JobToken token, Optional<SSLContext> tls,
      Duration timeout) throws IOException {
    SocketChannel channel = SocketChannel.open();
    try {
      configure(channel);
      channel.socket().connect(new InetSocketAddress(address.host(), address.port()), (int) timeout.toMillis());
      Socket socket = channel.socket();
      socket.setSoTimeout((int) timeout.toMillis());
      RingStream stream = tls.isEmpty() ? RingStream.plain(channel) : tlsClient(channel, tls.get(), address, next);
      DataOutputStream out = new DataOutputStream(stream.out());
      byte[] secret = token.value().getBytes(StandardCharsets.US_ASCII);
      out.writeInt(MAGIC);
      out.writeInt(rank);
      out.writeInt(secret.length);
      out.write(secret);
      out.flush();
      DataInputStream in = new DataInputStream(stream.in());
      if (in.readByte() != 0) {
        throw new IOException("collective stream to " + next + " at " + address + " refused: " + in.readUTF());
      }
      socket.setSoTimeout(0);
      return stream;
    } catch (IOException e) {
      channel.close();
      throw e instanceof SocketTimeoutException
          ? new IOException("no answer from " + next + " at " + address + " within " + Durations.words(timeout), e)
          : e;
    }
  }

  private static RingStream tlsClient(SocketChannel channel, SSLContext tls, HostPort address, TaskId next)
      throws IOException {
    try {
      return RingStream.tlsClient(channel, tls, address);
    } catch (SSLException e) {
      throw new IOException("TLS handshake with " + next + " at " + address + " failed: " + e.getMessage()
          + " (every task of a job needs the same " + TLS_SETTINGS + ")", e);
    }
  }

  /**
   * Accepts the previous rank's stream, refusing strangers (wrong token, wrong rank, other TLS
   * settings) in words, until the previous rank comes or the timeout ends.
   */
  static RingStream accept(ServerSocketChannel server, CollectiveGroup group, TaskId prev, JobToken token,
      Optional<SSLContext> tls, Duration timeout) throws IOException {
    long deadline = System.nanoTime() + timeout.toNanos();
    int expected = Math.floorMod(group.rank() - 1, group.size());
    while (true) {
      long left = TimeUnit.NANOSECONDS.toMillis(deadline - System.nanoTime());
      if (left <= 0) {
        throw new IOException("no collective stream from " + prev + " within " + Durations.words(timeout));
      }
      server.socket().setSoTimeout((int) left);
      Socket socket;
      try {
        socket = server.socket().accept();
      } catch (SocketTimeoutException e) {
        throw new IOException("no collective stream from " + prev + " within " + Durations.words(timeout), e);
      }
      SocketChannel channel = socket.getChannel();
      try {
        configure(channel);
        socket.setSoTimeout((int) Math.max(1, Math.min(left, HANDSHAKE_TIMEOUT.toMillis())));
        RingStream stream;
        if (tls.isPresent()) {
          // A peer without TLS opens with the plain handshake: answer it in words it can read.
          byte[] first = new DataInputStream(socket.getInputStream()).readNBytes(4);
          if (first.length == 4 && ByteBuffer.wrap(first).getInt() == MAGIC) {
            refuse(channel, new DataOutputStream(socket.getOutputStream()), "this task's collectives use TLS and the "
                + "peer's do not; every task of a job needs the same " + TLS_SETTINGS);
            continue;
          }
          stream = RingStream.tlsServer(channel, tls.get(), first);
        } else {
          stream = RingStream.plain(channel);
        }
        DataInputStream in = new DataInputStream(stream.in());
        DataOutputStream out = new DataOutputStream(stream.out());
        String refusal = null;
        int magic = in.readInt();
        if (magic != MAGIC) {
          refusal = magic >>> 24 == TLS_HANDSHAKE_RECORD
              ? "the peer's collectives use TLS and this task's do not; every task of a job needs the same " + TLS_SETTINGS
              : "not a Muster collective stream";
        } else {
          int rank = in.readInt();
          int length = in.readInt();
          if (length < 0 || length > 4096) {
            refusal = "malformed handshake";
          } else {
            byte[] secret = in.readNBytes(length);
            if (!token.matches(new String(secret, StandardCharsets.US_ASCII))) {
              refusal = "job token does not match (task " + group.self().fullName() + ")";
            } else if (rank != expected) {
              refusal = "rank " + rank + " is not this rank's ring predecessor (" + expected + ")";
            }
          }
        }
        if (refusal != null) {
          refuse(channel, out, refusal);
          continue;
        }
        out.writeByte(0);
        out.flush();
        socket.setSoTimeout(0);
        return stream;
      } catch (SocketTimeoutException e) {
        log.warn("closed a connection to the collective port from {}: no handshake within {} s",
            socket.getRemoteSocketAddress(), HANDSHAKE_TIMEOUT.toSeconds());
        channel.close();
      } catch (IOException e) {
        log.warn("dropped a collective stream from {}: {}", socket.getRemoteSocketAddress(), e.toString());
        channel.close();
      }
    }
  }

  private static final String TLS_SETTINGS = "TLS settings (MUSTER_TLS_CERT, MUSTER_TLS_KEY, MUSTER_TLS_CA)";
  /** A TLS stream opens with a handshake record: content type 22. */
  private static final int TLS_HANDSHAKE_RECORD = 22;
  private static final Duration REFUSAL_LINGER = Duration.ofSeconds(1);

  private static void refuse(SocketChannel channel, DataOutputStream out, String refusal) throws IOException {
    out.writeByte(1);
    out.writeUTF(refusal);
    out.flush();
    log.warn("refused a collective stream from {}: {}", channel.getRemoteAddress(), refusal);
    // Closing with the peer's bytes unread would reset the connection, and the reset can overtake
    // the refusal: read what the peer sends until it hangs up (it does once it has the refusal).
    Socket socket = channel.socket();
    socket.shutdownOutput();
    socket.setSoTimeout((int) REFUSAL_LINGER.toMillis());
    try {
      socket.getInputStream().skip(Long.MAX_VALUE);
    } catch (SocketTimeoutException e) {
      // a stranger that does not hang up is cut off
    }
    channel.close();
  }

  private static void configure(SocketChannel channel) throws IOException {
    channel.setOption(StandardSocketOptions.TCP_NODELAY, true);
    channel.setOption(StandardSocketOptions.SO_SNDBUF, 4 << 20);
    channel.setOption(StandardSocketOptions.SO_RCVBUF, 4 << 20);
  }
}
