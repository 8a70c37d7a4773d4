package io.muster.collective;

import io.muster.cluster.HostPort;
import io.muster.cluster.TaskId;
import io.muster.coordination.CoordinationAgent;
import io.muster.rpc.JobToken;
import io.muster.rpc.Security;
import io.muster.rpc.TlsContexts;
import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.IOException;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.net.SocketTimeoutException;
import java.net.StandardSocketOptions;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.channels.ServerSocketChannel;
import java.nio.channels.SocketChannel;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import java.util.concurrent.locks.LockSupport;
import java.util.concurrent.locks.ReentrantLock;
import javax.net.ssl.SSLContext;
import javax.net.ssl.SSLException;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The data plane of a collective group: one TCP stream to the next rank (written) and one from
 * the previous rank (read), set up once and kept for the life of the group.
 *
 * <p>Streams are opened with a handshake that carries the job token (checked in constant time;
 * a stranger is refused and the accept goes on). With TLS configured, every stream is TLS with the
 * job's certificates (the rank that accepts serves the certificate, the one that connects checks
 * it, as on gRPC), the token handshake runs inside it, and a peer without TLS is refused in words.
 * Data moves in frames: a 16-byte header (type,
 * op sequence number, step, payload length) then the payload, so a rank that calls a different
 * collective, or with a different size, is caught instead of mixing data. Small frames are
 * written by the calling thread; large ones by a sender thread so that sending, receiving and
 * reducing overlap. When the group fails, an ABORT frame carrying the reason is passed on around
 * the ring, so every rank fails with the words of the rank that saw the failure first.
 */
final class Ring implements AutoCloseable {

  static final int HEADER = 16;
  private static final int DATA = 1;
  private static final int ABORT = 2;
  static final int MAGIC = 0x4d555331; // "MUS1"
  private static final Logger log = LoggerFactory.getLogger(Ring.class);

  private final TaskId prevTask;
  private final TaskId nextTask;
  private final RingStream toNext;
  private final RingStream fromPrev;
  private final ReentrantLock writeLock = new ReentrantLock();
  private final ByteBuffer writeHeader = ByteBuffer.allocateDirect(HEADER).order(ByteOrder.LITTLE_ENDIAN);
  private final ByteBuffer readHeader = ByteBuffer.allocateDirect(HEADER).order(ByteOrder.LITTLE_ENDIAN);
  private final ByteBuffer[] scatter = new ByteBuffer[2];
  private final ByteBuffer[] gather = new ByteBuffer[2];
  private final LinkedBlockingQueue<Frame> queue = new LinkedBlockingQueue<>();
  private final AtomicLong queued = new AtomicLong();
  private final AtomicLong sent = new AtomicLong();
  private final AtomicReference<String> failure = new AtomicReference<>();
  private final Thread sender;
  private volatile Thread waiter;
  volatile long lastProgressNanos = System.nanoTime();

  private record Frame(int seq, int step, ByteBuffer payload) {}

  private Ring(TaskId self, TaskId prevTask, TaskId nextTask, RingStream toNext, RingStream fromPrev) {
    this.prevTask = prevTask;
    this.nextTask = nextTask;
    this.toNext = toNext;
    this.fromPrev = fromPrev;
    this.sender = new Thread(this::sendLoop, "muster-collective-send-" + self.job() + "-" + self.index());
    sender.setDaemon(true);
    sender.start();
  }

  /**
   * Binds a listening socket on {@code bindHost}, publishes its address under the group's key in
   * the coordination service, connects to the next rank and accepts the previous one; over TLS
   * when {@code security} has it.
   */
  static Ring connect(CollectiveGroup group, String groupName, String advertisedHost, InetSocketAddress bind,
      CoordinationAgent agent, Security security, Duration timeout) throws IOException {
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
      HostPort nextAddress = HostPort.parse(new String(agent.get(key(groupName, group.rank() + 1 == group.size()
          ? 0 : group.rank() + 1), timeout), StandardCharsets.UTF_8));
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
        accepted.cancel(true);
        throw e;
      }
      try {
        RingStream fromPrev = accepted.get(timeout.toMillis() + 1000, TimeUnit.MILLISECONDS);
        log.info("{} collective ring ready: rank {} of {}, receiving from {}, sending to {} at {}{}", self,
            group.rank(), group.size(), prev, next, nextAddress, tls.isPresent() ? " (TLS)" : "");
        return new Ring(self, prev, next, toNext, fromPrev);
      } catch (Exception e) {
        toNext.close();
        Throwable cause = e instanceof java.util.concurrent.ExecutionException ? e.getCause() : e;
        throw new IOException(self + " could not accept the collective stream from " + prev + ": " + cause.getMessage(), cause);
      }
    }
  }

  static String key(String group, int rank) {
    return "muster/collective/" + group + "/" + rank;
  }

  private static RingStream dial(HostPort address, int rank, TaskId next, JobToken token, Optional<SSLContext> tls,
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
          ? new IOException("no answer from " + next + " at " + address + " within " + timeout, e)
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

  private static RingStream accept(ServerSocketChannel server, CollectiveGroup group, TaskId prev, JobToken token,
      Optional<SSLContext> tls, Duration timeout) throws IOException {
    long deadline = System.nanoTime() + timeout.toNanos();
    int expected = Math.floorMod(group.rank() - 1, group.size());
    while (true) {
      long left = TimeUnit.NANOSECONDS.toMillis(deadline - System.nanoTime());
      if (left <= 0) {
        throw new IOException("no collective stream from " + prev + " within " + timeout);
      }
      server.socket().setSoTimeout((int) left);
      Socket socket;
      try {
        socket = server.socket().accept();
      } catch (SocketTimeoutException e) {
        throw new IOException("no collective stream from " + prev + " within " + timeout, e);
      }
      SocketChannel channel = socket.getChannel();
      try {
        configure(channel);
        socket.setSoTimeout((int) Math.max(1, left));
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

  TaskId prev() {
    return prevTask;
  }

  // ---- sending --------------------------------------------------------------------------------

  /** Writes one frame from the calling thread (only while no frame is queued). */
  void send(int seq, int step, ByteBuffer payload) {
    writeLock.lock();
    try {
      writeFrame(DATA, seq, step, payload);
    } catch (IOException e) {
      throw fail("sending to " + nextTask + " failed: " + cause(e), e);
    } finally {
      writeLock.unlock();
    }
  }

  /** Queues a frame for the sender thread; the payload must stay untouched until {@link #awaitSent()}. */
  void enqueue(int seq, int step, ByteBuffer payload) {
    queued.incrementAndGet();
    queue.add(new Frame(seq, step, payload));
  }

  /** Waits until every queued frame has been written. */
  void awaitSent() {
    waiter = Thread.currentThread();
    try {
      while (sent.get() < queued.get()) {
        check();
        LockSupport.parkNanos(20_000);
      }
    } finally {
      waiter = null;
    }
    check();
  }

  private void sendLoop() {
    try {
      while (true) {
        Frame frame = queue.take();
        writeLock.lock();
        try {
          writeFrame(DATA, frame.seq(), frame.step(), frame.payload());
        } finally {
          writeLock.unlock();
        }
        sent.incrementAndGet();
        Thread w = waiter;
        if (w != null && sent.get() >= queued.get()) {
          LockSupport.unpark(w);
        }
      }
    } catch (InterruptedException e) {
      // closing
    } catch (IOException e) {
      fail("sending to " + nextTask + " failed: " + cause(e), e);
    }
  }

  private void writeFrame(int type, int seq, int step, ByteBuffer payload) throws IOException {
    writeHeader.clear();
    writeHeader.putInt(type).putInt(seq).putInt(step).putInt(payload.remaining()).flip();
    gather[0] = writeHeader;
    gather[1] = payload;
    while (payload.hasRemaining() || writeHeader.hasRemaining()) {
      toNext.write(gather);
    }
    gather[1] = null;
  }

  // ---- receiving ------------------------------------------------------------------------------

  /**
   * Reads the next frame into {@code into} (position to limit), which must be op {@code seq},
   * step {@code step}, with exactly that many bytes.
   */
  void receive(int seq, int step, ByteBuffer into, String what) {
    check();
    int expected = into.remaining();
    int start = into.position();
    try {
      readHeader.clear();
      scatter[0] = readHeader;
      scatter[1] = into;
      while (readHeader.hasRemaining()) {
        read(scatter);
      }
      readHeader.flip();
      int type = readHeader.getInt();
      int gotSeq = readHeader.getInt();
      int gotStep = readHeader.getInt();
      int length = readHeader.getInt();
      if (type == ABORT) {
        throw fail(readAbortReason(into, start, length), null);
      }
      if (type != DATA || gotSeq != seq || gotStep != step || length != expected) {
        throw fail("collectives out of step: " + prevTask + " sent op " + gotSeq + " step " + gotStep + " with "
            + length + " bytes, but this rank expected " + what + " (op " + seq + " step " + step + ", " + expected
            + " bytes); every rank must call the same collectives in the same order with the same sizes", null);
      }
      scatter[1] = null;
      while (into.hasRemaining()) {
        read(into);
      }
    } catch (IOException e) {
      throw fail(failure.get() != null ? failure.get() : "receiving from " + prevTask + " failed: " + cause(e), e);
    }
  }

  /** What went wrong, in words; an interrupt means this task itself was stopped, not its peer. */
  private String cause(IOException e) {
    for (Throwable t = e; t != null; t = t.getCause()) { // under TLS, the interrupt comes wrapped
      if (t instanceof java.nio.channels.ClosedByInterruptException) {
        return "this task's thread was interrupted (the task was killed or cancelled)";
      }
    }
    return e.getMessage() != null ? e.getMessage() : e.getClass().getSimpleName();
  }

  private void read(ByteBuffer... buffers) throws IOException {
    long n = buffers.length == 1 ? fromPrev.read(buffers[0]) : fromPrev.read(buffers);
    if (n < 0) {
      throw new IOException("the connection was closed; " + prevTask + " has died or left the job");
    }
    lastProgressNanos = System.nanoTime();
  }

  /** The reason an ABORT frame carries; its first bytes may already be in {@code into} from {@code start}. */
  private String readAbortReason(ByteBuffer into, int start, int length) throws IOException {
    byte[] reason = new byte[Math.max(0, Math.min(length, 64 << 10))];
    int have = Math.min(into.position() - start, reason.length);
    into.duplicate().position(start).get(reason, 0, have);
    ByteBuffer rest = ByteBuffer.wrap(reason, have, reason.length - have);
    while (rest.hasRemaining()) {
      read(rest);
    }
    return new String(reason, StandardCharsets.UTF_8);
  }

  // ---- failure --------------------------------------------------------------------------------

  /** Throws if the group has failed. */
  void check() {
    String reason = failure.get();
    if (reason != null) {
      throw new CollectiveException("Collective ops is aborted by: " + reason
          + "\nThe error could be from a previous operation. Restart your program to reset.", null);
    }
  }

  /**
   * Fails the group (the first reason wins), passes the reason to the next rank in an ABORT
   * frame when the stream is free, and closes both streams.
   */
  CollectiveException fail(String reason, Throwable cause) {
    if (failure.compareAndSet(null, reason)) {
      log.error("collectives failed: {}", reason);
      // Stop reading without resetting the stream: a reset would make the previous rank fail with
      // "connection reset" and name this rank instead of the one that really failed.
      try {
        fromPrev.shutdownInput();
      } catch (IOException e) {
        closeQuietly(fromPrev);
      }
      try {
        if (writeLock.tryLock(200, TimeUnit.MILLISECONDS)) {
          try {
            writeFrame(ABORT, -1, -1, ByteBuffer.wrap(reason.getBytes(StandardCharsets.UTF_8)));
          } finally {
            writeLock.unlock();
          }
        }
      } catch (IOException | InterruptedException e) {
        log.debug("could not pass the abort on to {}: {}", nextTask, e.toString());
      }
      closeQuietly(toNext);
      sender.interrupt();
    }
    return new CollectiveException("Collective ops is aborted by: " + failure.get()
        + "\nThe error could be from a previous operation. Restart your program to reset.", cause);
  }

  boolean failed() {
    return failure.get() != null;
  }

  @Override
  public void close() {
    sender.interrupt();
    closeQuietly(toNext);
    closeQuietly(fromPrev);
  }

  private static void closeQuietly(RingStream stream) {
    try {
      stream.close();
    } catch (IOException e) {
      // already broken
    }
  }
}
