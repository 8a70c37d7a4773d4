package io.muster.collective;

import io.muster.cluster.HostPort;
import io.muster.cluster.TaskId;
import io.muster.coordination.CoordinationAgent;
import io.muster.rpc.JobToken;
import io.muster.rpc.Security;
import io.muster.rpc.TlsContexts;
import java.io.IOException;
import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.channels.ServerSocketChannel;
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
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The data plane of a collective group: one TCP stream to the next rank (written) and one from
 * the previous rank (read), set up once and kept for the life of the group.
 *
 * <p>Streams are opened with a handshake that carries the job token (checked in constant time;
 * a stranger is refused and the accept goes on; see {@link RingSetup}). With TLS configured, every
 * stream is TLS with the job's certificates (the rank that accepts serves the certificate, the one
 * that connects checks it, as on gRPC) and the token handshake runs inside it. Data moves in
 * frames: a 16-byte header (type, op sequence number, step, payload length) then the payload, so a
 * rank that calls a different collective, or with a different size, is caught instead of mixing
 * data. Small frames are
 * written by the calling thread; large ones by a sender thread so that sending, receiving and
 * reducing overlap. When the group fails, an ABORT frame carrying the reason is passed on around
 * the ring, so every rank fails with the words of the rank that saw the failure first.
 */
final class Ring implements AutoCloseable {

  static final int HEADER = 16;
  private static final int DATA = 1;
  private static final int ABORT = 2;
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
  private volatile FailureListener listener;
  /** Set when this rank saw the failure first (not passed on to it); the listener hears of it once. */
  private volatile Seen firstSeen;
  private final java.util.concurrent.atomic.AtomicBoolean told = new java.util.concurrent.atomic.AtomicBoolean();
  volatile long lastProgressNanos = System.nanoTime();

  /** Told once, on the thread that saw it, of a failure this rank saw first (not one passed on to it). */
  interface FailureListener {
    /** @param brokenPeer the neighbour whose stream broke, when that is the failure */
    void failed(String reason, TaskId brokenPeer);
  }

  private record Frame(int seq, int step, ByteBuffer payload) {}

  private record Seen(String reason, TaskId peer) {}

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
          return RingSetup.accept(server, group, prev, token, tls, timeout);
        } catch (IOException e) {
          throw new java.io.UncheckedIOException(e);
        }
      }, r -> new Thread(r, "muster-collective-accept-" + self.job() + "-" + self.index()).start());
      RingStream toNext;
      try {
        toNext = RingSetup.dial(nextAddress, group.rank(), next, token, tls, timeout);
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


  TaskId prev() {
    return prevTask;
  }

  /** Sets the listener; when the ring has already failed here, it is told at once. */
  void onFailure(FailureListener value) {
    listener = value;
    tell();
  }

  private void tell() {
    Seen seen = firstSeen;
    FailureListener l = listener;
    if (seen != null && l != null && told.compareAndSet(false, true)) {
      try {
        l.failed(seen.reason(), seen.peer());
      } catch (RuntimeException e) {
        log.warn("the collective failure listener threw", e);
      }
    }
  }

  // ---- sending --------------------------------------------------------------------------------

  /** Writes one frame from the calling thread (only while no frame is queued). */
  void send(int seq, int step, ByteBuffer payload) {
    writeLock.lock();
    try {
      writeFrame(DATA, seq, step, payload);
    } catch (IOException e) {
      throw failSeen("sending to " + nextTask + " failed: " + cause(e), brokenUnlessInterrupted(e, nextTask), e);
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
      failSeen("sending to " + nextTask + " failed: " + cause(e), brokenUnlessInterrupted(e, nextTask), e);
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
        throw failSeen("collectives out of step: " + prevTask + " sent op " + gotSeq + " step " + gotStep + " with "
            + length + " bytes, but this rank expected " + what + " (op " + seq + " step " + step + ", " + expected
            + " bytes); every rank must call the same collectives in the same order with the same sizes", null, null);
      }
      scatter[1] = null;
      while (into.hasRemaining()) {
        read(into);
      }
    } catch (IOException e) {
      if (failure.get() != null) {
        throw fail(failure.get(), e);
      }
      throw failSeen("receiving from " + prevTask + " failed: " + cause(e), brokenUnlessInterrupted(e, prevTask), e);
    }
  }

  /** What went wrong, in words; an interrupt means this task itself was stopped, not its peer. */
  private String cause(IOException e) {
    if (interrupted(e)) {
      return "this task's thread was interrupted (the task was killed or cancelled)";
    }
    return e.getMessage() != null ? e.getMessage() : e.getClass().getSimpleName();
  }

  private static boolean interrupted(IOException e) {
    for (Throwable t = e; t != null; t = t.getCause()) { // under TLS, the interrupt comes wrapped
      if (t instanceof java.nio.channels.ClosedByInterruptException) {
        return true;
      }
    }
    return false;
  }

  /** The neighbour whose stream broke, or null when this task's own thread was interrupted. */
  private static TaskId brokenUnlessInterrupted(IOException e, TaskId peer) {
    return interrupted(e) ? null : peer;
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
   * Fails the group for a cause this rank saw itself (a broken stream, a peer out of step, no
   * data for the timeout), and tells the listener; {@code brokenPeer} is the neighbour whose
   * stream broke, or null.
   */
  CollectiveException failSeen(String reason, TaskId brokenPeer, Throwable cause) {
    if (failFirst(reason)) {
      firstSeen = new Seen(reason, brokenPeer);
      tell();
    }
    return failure(cause);
  }

  /**
   * Fails the group (the first reason wins), passes the reason to the next rank in an ABORT
   * frame when the stream is free, and closes both streams.
   */
  CollectiveException fail(String reason, Throwable cause) {
    failFirst(reason);
    return failure(cause);
  }

  /** Whether this reason was the first. */
  private boolean failFirst(String reason) {
    if (!failure.compareAndSet(null, reason)) {
      return false;
    }
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
    return true;
  }

  private CollectiveException failure(Throwable cause) {
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
