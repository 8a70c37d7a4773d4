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
import java.nio.channels.ClosedByInterruptException;
import java.nio.channels.ServerSocketChannel;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicReference;
import java.util.concurrent.locks.LockSupport;
import java.util.concurrent.locks.ReentrantLock;
import java.util.function.Consumer;
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
 * data. When the group fails, an ABORT frame carrying the reason is passed on around the ring, so
 * every rank fails with the words of the rank that saw the failure first. Between frames, a rank
 * that is alive sends a header-only KEEPALIVE frame when asked ({@link #keepAlive}): a stream that
 * stays silent then means a frozen process or a host cut off, not a peer busy between collectives.
 *
 * <p>A collective is one {@link #transfer}: the steps this rank sends and receives, moved by the
 * calling thread alone over non-blocking streams. It writes what the next rank can take, reads
 * what the previous one has sent, reduces it as it arrives, and forwards reduced bytes as soon as
 * they are ready, so sending, receiving and reducing overlap without a hand-off between threads.
 * When neither stream can move, it polls briefly (yielding the core instead when more ranks share
 * this host than it has cores) and then sleeps until a stream is ready: on small messages, most of
 * the time is otherwise spent waking up.
 */
final class Ring implements AutoCloseable {

  static final int HEADER = 16;
  /** Payloads travel in frames of at most this size: what an abort must complete before it can be sent. */
  static final int FRAME_BYTES = 256 << 10;
  private static final int DATA = 1;
  private static final int ABORT = 2;
  private static final int KEEPALIVE = 3;
  /** How long a rank polls a stream that has nothing before it sleeps: about three loopback round trips. */
  private static final long POLL_NANOS = TimeUnit.MICROSECONDS.toNanos(100);
  /** How long a rank sleeps when the next rank takes no bytes, unless a TLS pump wakes it. */
  private static final long BLOCKED_SEND_NANOS = TimeUnit.MICROSECONDS.toNanos(50);
  /** How long a failing rank tries to pass the abort on, and to read the reason of one it receives. */
  private static final long ABORT_NANOS = TimeUnit.MILLISECONDS.toNanos(200);
  /**
   * How long a broken stream waits for the group's failure before it blames the neighbour: a rank
   * that aborts (the coordination service told it a task was lost) may close its stream before its
   * ABORT frame gets through, and the service's word reaches this rank a moment later.
   */
  private static final long BROKEN_GRACE_NANOS = TimeUnit.MILLISECONDS.toNanos(200);
  private static final Duration ANSWER_BEFORE_CLOSING = Duration.ofSeconds(2);
  private static final Logger log = LoggerFactory.getLogger(Ring.class);

  private final TaskId prevTask;
  private final TaskId nextTask;
  private final RingStream toNext;
  private final RingStream fromPrev;
  private final boolean yieldWhilePolling;
  /** The thread in {@link #transfer}, which TLS streams' pumps unpark when they have moved bytes. */
  private volatile Thread waiter;
  /** Guards writing to the next rank, and {@link #openFrame} with {@link #writeHeader}. */
  private final ReentrantLock writeLock = new ReentrantLock();
  private final ByteBuffer writeHeader = ByteBuffer.allocateDirect(HEADER).order(ByteOrder.LITTLE_ENDIAN).limit(0);
  /** Payload bytes of the frame being written that are still to go, which an abort must send first. */
  private int openFrame;
  /** A KEEPALIVE frame; when the stream took only part of it, the rest goes before any other frame. */
  private final ByteBuffer keepAlive = ByteBuffer.allocateDirect(HEADER).order(ByteOrder.LITTLE_ENDIAN).limit(0);
  private final ByteBuffer[] keepAliveFrame = {keepAlive};
  private final ByteBuffer readHeader = ByteBuffer.allocateDirect(HEADER).order(ByteOrder.LITTLE_ENDIAN);
  private final ByteBuffer staging = ByteBuffer.allocateDirect(FRAME_BYTES).order(ByteOrder.LITTLE_ENDIAN);
  /** The first failure: its reason, and what caused it (kept as the cause of every later failure's exception). */
  private final AtomicReference<Failure> failure = new AtomicReference<>();

  private record Failure(String reason, Throwable cause) {}
  private volatile FailureListener listener;
  /** Told of every failure of this ring, on the thread that failed it: the group fails its other rings with it. */
  private volatile Consumer<String> onFailed = reason -> { };
  /** Set when this rank saw the failure first (not passed on to it); the listener hears of it once. */
  private volatile Seen firstSeen;
  private final AtomicBoolean told = new AtomicBoolean();
  volatile long lastProgressNanos = System.nanoTime();

  /** Told once, on the thread that saw it, of a failure this rank saw first (not one passed on to it). */
  interface FailureListener {
    /** @param brokenPeer the neighbour whose stream broke, when that is the failure */
    void failed(String reason, TaskId brokenPeer);
  }

  /**
   * Bytes of one step for the next rank: {@code payload} (position to limit), sent as far as
   * receive {@code after} of the same transfer has filled the same bytes, or at once when -1.
   */
  record Send(int step, ByteBuffer payload, int after) {}

  /** Bytes of one step from the previous rank into {@code target} (position to limit): copied, or reduced into it. */
  record Receive(int step, ByteBuffer target, Reduction reduction) {
    static Receive copy(int step, ByteBuffer target) {
      return new Receive(step, target, null);
    }
  }

  /** {@code target op= received}, element by element, then divided by {@code divisor} when above 1 (MEAN's last step). */
  record Reduction(DataType type, ReduceOp op, int divisor) {}

  private record Seen(String reason, TaskId peer) {}

  private Ring(TaskId self, TaskId prevTask, TaskId nextTask, RingStream toNext, RingStream fromPrev,
      boolean yieldWhilePolling) throws IOException {
    this.prevTask = prevTask;
    this.nextTask = nextTask;
    this.toNext = toNext;
    this.fromPrev = fromPrev;
    this.yieldWhilePolling = yieldWhilePolling;
    String name = self.job() + "-" + self.index();
    Runnable wake = () -> {
      Thread w = waiter;
      if (w != null) {
        LockSupport.unpark(w);
      }
    };
    toNext.start(true, "muster-collective-tls-send-" + name, wake);
    fromPrev.start(false, "muster-collective-tls-receive-" + name, wake);
  }

  /**
   * Binds a listening socket on {@code bindHost}, publishes its address under the group's key in
   * the coordination service, connects to the next rank and accepts the previous one; over TLS
   * when {@code security} has it. A rank polling for data yields its core when this group has more
   * ranks on this host than it has cores, or when {@code sharesCores} says the job has (a pair's
   * ring of two counts only its own).
   */
  static Ring connect(CollectiveGroup group, String groupName, String advertisedHost, InetSocketAddress bind,
      CoordinationAgent agent, Security security, Duration timeout, boolean sharesCores) throws IOException {
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
          return RingSetup.accept(server, group, prev, token, tls, timeout);
        } catch (IOException e) {
          throw new java.io.UncheckedIOException(e);
        }
      }, r -> new Thread(r, "muster-collective-accept-" + self.job() + "-" + self.index()).start());
      RingStream toNext;
      try {
        toNext = RingSetup.dial(nextAddress, group.rank(), next, token, tls, timeout);
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

  private static HostPort address(CoordinationAgent agent, String group, int rank, Duration timeout) {
    return HostPort.parse(new String(agent.get(key(group, rank), timeout), StandardCharsets.UTF_8));
  }

  static String key(String group, int rank) {
    return "muster/collective/" + group + "/" + rank;
  }

  TaskId prev() {
    return prevTask;
  }

  /** Whether a rank polling this ring yields its core: more ranks on this host than cores. */
  boolean sharesCores() {
    return yieldWhilePolling;
  }

  /**
   * Sets what is told of a failure of this ring (its own, or passed on to it): once, or twice when
   * the ring fails while it is set, so {@code action} must bear being repeated.
   */
  void onFailed(Consumer<String> action) {
    onFailed = action;
    Failure failed = failure.get();
    if (failed != null) {
      action.accept(failed.reason());
    }
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

  // ---- moving data ----------------------------------------------------------------------------

  /**
   * Runs one collective: every send and receive, each in order, until all are done. Each receive
   * must be a frame of op {@code seq} and its step, with exactly the expected bytes; {@code what}
   * names the collective in the error when it is not.
   */
  void transfer(int seq, List<Send> sends, List<Receive> receives, String what) {
    check();
    Thread self = Thread.currentThread();
    if (waiter != self) { // kept after the transfer: a pump's late unpark costs one early wake-up at most
      waiter = self;
    }
    new Transfer(seq, sends, receives, what).run();
  }

  /** One collective's progress through its sends and receives. */
  private final class Transfer {
    private final int seq;
    private final List<Send> sends;
    private final List<Receive> receives;
    private final String what;
    /** Bytes of each receive's target filled so far: copied, or reduced. */
    private final int[] filled;
    private int sendIndex;
    private int sent;
    /** Where the frame being written ends in the current send's payload; -1 between frames. */
    private int sendFrameEnd = -1;
    private boolean sendBlocked;
    private int receiveIndex;
    private int received;
    /** Where the frame being read ends in the current receive's payload; -1 while its header is read. */
    private int receiveFrameEnd = -1;
    private int staged;
    // Views of the current send's and receive's buffers, and the arrays the streams take: made
    // once per step, not per read, since polling reads thousands of times; and held here, not in
    // the long-lived ring, where every store would cost the garbage collector a card to scan.
    private final ByteBuffer[] writing;
    private final ByteBuffer[] reading;
    private final ByteBuffer[] readingPayload = new ByteBuffer[1];
    private ByteBuffer sendView;
    private ByteBuffer receiveView;

    Transfer(int seq, List<Send> sends, List<Receive> receives, String what) {
      this.seq = seq;
      this.sends = sends;
      this.receives = receives;
      this.what = what;
      this.filled = new int[receives.size()];
      this.writing = new ByteBuffer[] {writeHeader, null};
      this.reading = new ByteBuffer[] {readHeader, null};
      readHeader.clear();
    }

    void run() {
      long idleSince = 0;
      while (sendIndex < sends.size() || receiveIndex < receives.size()) {
        boolean moved = sendIndex < sends.size() && send();
        moved |= receiveIndex < receives.size() && receive(false);
        if (moved) {
          idleSince = 0;
          continue;
        }
        check();
        long now = System.nanoTime();
        if (idleSince == 0) {
          idleSince = now;
        }
        if (now - idleSince < POLL_NANOS) {
          if (yieldWhilePolling) {
            Thread.yield();
          } else {
            Thread.onSpinWait();
          }
          continue;
        }
        if (receiveIndex < receives.size() && !sendBlocked) {
          // all that can come next is from the previous rank: sleep in the read itself (a failure,
          // the watchdog's timeout too, ends it by shutting the stream's input)
          receive(true);
        } else {
          // the next rank is not taking bytes: let it catch up (a pump that moves some wakes this thread)
          LockSupport.parkNanos(this, BLOCKED_SEND_NANOS);
        }
        idleSince = 0;
      }
    }

    /** Writes what it can of the current send; whether it wrote anything. */
    private boolean send() {
      Send s = sends.get(sendIndex);
      ByteBuffer payload = s.payload();
      int length = payload.remaining();
      int ready = s.after() < 0 ? length : Math.min(length, filled[s.after()]);
      sendBlocked = false;
      if (sendFrameEnd < 0 ? ready == sent && length > 0 : ready == sent && !writeHeader.hasRemaining()) {
        return false; // waiting for bytes to forward
      }
      int base = payload.position();
      long n;
      writeLock.lock();
      try {
        check();
        if (keepAlive.hasRemaining() && (toNext.write(keepAliveFrame) == 0 || keepAlive.hasRemaining())) {
          sendBlocked = true;
          return false;
        }
        if (sendFrameEnd < 0) {
          int frame = Math.min(FRAME_BYTES, length - sent);
          writeHeader.clear();
          writeHeader.putInt(DATA).putInt(seq).putInt(s.step()).putInt(frame).flip();
          sendFrameEnd = sent + frame;
          openFrame = frame;
        }
        if (sendView == null) {
          sendView = payload.duplicate();
          writing[1] = sendView;
        }
        sendView.limit(base + Math.min(ready, sendFrameEnd)).position(base + sent);
        n = toNext.write(writing);
        sent = sendView.position() - base;
        openFrame = sendFrameEnd - sent;
      } catch (IOException e) {
        throw broken(e, "sending to " + nextTask, nextTask);
      } finally {
        writeLock.unlock();
      }
      if (!writeHeader.hasRemaining() && sent == sendFrameEnd) {
        sendFrameEnd = -1;
        if (sent == length) {
          sendIndex++;
          sent = 0;
          sendView = null;
        }
      }
      sendBlocked = n == 0;
      return n > 0;
    }

    /**
     * Reads what has arrived for the current receive, reducing it as it comes; whether it read
     * anything. With {@code block}, waits for something to arrive.
     */
    private boolean receive(boolean block) {
      Receive r = receives.get(receiveIndex);
      ByteBuffer target = r.target();
      int base = target.position();
      int length = target.remaining();
      boolean header = receiveFrameEnd < 0;
      int frameLeft = header ? Math.min(FRAME_BYTES, length - received) : receiveFrameEnd - received;
      if (receiveView == null) {
        receiveView = r.reduction() == null ? target.duplicate() : staging;
        reading[1] = receiveView;
        readingPayload[0] = receiveView;
      }
      ByteBuffer into = receiveView;
      if (r.reduction() == null) {
        into.limit(base + received + frameLeft).position(base + received);
      } else {
        into.limit(staged + frameLeft).position(staged);
      }
      int start = into.position();
      long n;
      try {
        if (Thread.currentThread().isInterrupted()) {
          throw new ClosedByInterruptException();
        }
        n = fromPrev.read(header ? reading : readingPayload, block);
        if (n < 0) {
          throw new IOException("the connection was closed; " + prevTask + " has died or left the job");
        }
      } catch (IOException e) {
        throw broken(e, "receiving from " + prevTask, prevTask);
      }
      if (n == 0) {
        return false;
      }
      lastProgressNanos = System.nanoTime();
      if (header) {
        if (!headerReady(into, start)) {
          return true;
        }
        int type = readHeader.getInt();
        int gotSeq = readHeader.getInt();
        int gotStep = readHeader.getInt();
        int frame = readHeader.getInt();
        if (type == ABORT) {
          throw fail(readAbortReason(into, start, frame), null);
        }
        if (type != DATA || gotSeq != seq || gotStep != r.step() || frame != frameLeft) {
          throw failSeen("collectives out of step: " + prevTask + " sent op " + gotSeq + " step " + gotStep + " with "
              + frame + " bytes, but this rank expected " + what + " (op " + seq + " step " + r.step() + ", "
              + frameLeft + " bytes); every rank must call the same collectives in the same order with the same sizes",
              null, null);
        }
        receiveFrameEnd = received + frame;
      }
      int arrived = into.position() - start;
      received += arrived;
      if (r.reduction() == null) {
        filled[receiveIndex] = received;
      } else {
        reduceStaged(r, arrived);
      }
      if (received == receiveFrameEnd) {
        receiveFrameEnd = -1;
        readHeader.clear();
        if (received == length) {
          receiveIndex++;
          received = 0;
          receiveView = null;
        }
      }
      return true;
    }

    /**
     * Whether {@code readHeader} holds, flipped, the whole header of a frame other than a
     * KEEPALIVE, which it drops. The read that filled a keepalive's header may have run on into
     * {@code into} (from {@code start}) with the bytes after it: they are the next frame's, so they
     * move back into the header and down to {@code start}.
     */
    private boolean headerReady(ByteBuffer into, int start) {
      while (!readHeader.hasRemaining()) {
        readHeader.flip();
        if (readHeader.getInt(0) != KEEPALIVE) {
          return true;
        }
        int after = into.position() - start;
        int toHeader = Math.min(after, HEADER);
        readHeader.clear().put(0, into, start, toHeader).position(toHeader);
        into.put(start, into, start + toHeader, after - toHeader).position(start + after - toHeader);
      }
      return false;
    }

    /** Reduces the whole elements staged so far into the target, keeping a partial one for the next read. */
    private void reduceStaged(Receive r, int arrived) {
      Reduction reduction = r.reduction();
      int unit = reduction.type().bytes();
      staged += arrived;
      int whole = staged - staged % unit;
      if (whole == 0) {
        return;
      }
      int at = r.target().position() + filled[receiveIndex];
      int count = whole / unit;
      Reductions.combine(reduction.type(), reduction.op(), r.target(), at, r.target(), at, staging, 0, count);
      if (reduction.divisor() > 1) {
        Reductions.divide(reduction.type(), r.target(), at, count, reduction.divisor());
      }
      filled[receiveIndex] += whole;
      staged -= whole;
      if (staged > 0) {
        staging.put(0, staging, whole, staged);
      }
    }
  }

  /**
   * The failure for a stream that broke, or the group's earlier failure when that is why: then the
   * break is this rank's own doing (it stopped reading) and blames no one.
   */
  private CollectiveException broken(IOException e, String doing, TaskId peer) {
    long grace = System.nanoTime() + BROKEN_GRACE_NANOS;
    while (failure.get() == null && System.nanoTime() < grace && !interrupted(e)) {
      LockSupport.parkNanos(TimeUnit.MILLISECONDS.toNanos(5));
    }
    if (failure.get() != null) {
      return failure();
    }
    return failSeen(doing + " failed: " + cause(e, peer), brokenUnlessInterrupted(e, peer), e);
  }

  /** What went wrong, in words; an interrupt means this task itself was stopped, not its peer. */
  private String cause(IOException e, TaskId peer) {
    if (interrupted(e)) {
      return "this task's thread was interrupted (the task was killed or cancelled)";
    }
    String message = e.getMessage() != null ? e.getMessage() : e.getClass().getSimpleName();
    // the words the kernel has for a peer that closed its end: say what they mean
    if (message.equals("Broken pipe") || message.startsWith("Connection reset")) {
      return "the connection was closed; " + peer + " has died or left the job (" + message + ")";
    }
    return message;
  }

  private static boolean interrupted(IOException e) {
    for (Throwable t = e; t != null; t = t.getCause()) { // under TLS, the interrupt comes wrapped
      if (t instanceof ClosedByInterruptException) {
        return true;
      }
    }
    return false;
  }

  /** The neighbour whose stream broke, or null when this task's own thread was interrupted. */
  private static TaskId brokenUnlessInterrupted(IOException e, TaskId peer) {
    return interrupted(e) ? null : peer;
  }

  /** The reason an ABORT frame carries; its first bytes may already be in {@code into} from {@code start}. */
  private String readAbortReason(ByteBuffer into, int start, int length) {
    byte[] reason = new byte[Math.max(0, Math.min(length, 64 << 10))];
    int have = Math.min(into.position() - start, reason.length);
    into.duplicate().position(start).get(reason, 0, have);
    ByteBuffer rest = ByteBuffer.wrap(reason, have, reason.length - have);
    ByteBuffer[] one = {rest};
    long deadline = System.nanoTime() + ABORT_NANOS;
    try {
      while (rest.hasRemaining() && System.nanoTime() < deadline) {
        if (fromPrev.read(one, false) < 0) {
          break;
        }
        LockSupport.parkNanos(20_000);
      }
    } catch (IOException e) {
      log.debug("the abort from {} was cut short: {}", prevTask, e.toString());
    }
    return new String(reason, 0, rest.position(), StandardCharsets.UTF_8);
  }

  /**
   * Sends the next rank a KEEPALIVE frame, unless a frame is being written (its bytes tell the
   * next rank as much) or the ring has failed. Called by the group's watchdog, every quarter of
   * the timeout: a rank busy between collectives (saving, reading its data) thus keeps the
   * ranks waiting on it from timing out. A broken stream is left for the next collective to find.
   */
  void keepAlive() {
    if (!writeLock.tryLock()) {
      return; // a collective is writing
    }
    try {
      if (failure.get() != null || openFrame > 0 || writeHeader.hasRemaining() || keepAlive.hasRemaining()) {
        return;
      }
      keepAlive.clear();
      keepAlive.putInt(KEEPALIVE).putInt(-1).putInt(-1).putInt(0).flip();
      toNext.write(keepAliveFrame);
    } catch (IOException e) {
      log.debug("no keepalive to {}: {}", nextTask, e.toString());
    } finally {
      writeLock.unlock();
    }
  }

  // ---- failure --------------------------------------------------------------------------------

  /** Throws if the group has failed. */
  void check() {
    if (failure.get() != null) {
      throw failure();
    }
  }

  /**
   * Fails the group for a cause this rank saw itself (a broken stream, a peer out of step, no
   * data for the timeout), and tells the listener; {@code brokenPeer} is the neighbour whose
   * stream broke, or null.
   */
  CollectiveException failSeen(String reason, TaskId brokenPeer, Throwable cause) {
    if (failFirst(reason, cause)) {
      firstSeen = new Seen(reason, brokenPeer);
      tell();
    }
    return failure();
  }

  /**
   * Fails the group (the first reason wins), passes the reason to the next rank in an ABORT
   * frame when the stream is free, and closes both streams.
   */
  CollectiveException fail(String reason, Throwable cause) {
    failFirst(reason, cause);
    return failure();
  }

  /** Whether this reason was the first. */
  private boolean failFirst(String reason, Throwable cause) {
    if (!failure.compareAndSet(null, new Failure(reason, cause))) {
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
    passOn(reason);
    closeQuietly(toNext);
    Thread w = waiter;
    if (w != null && w != Thread.currentThread()) {
      LockSupport.unpark(w);
    }
    onFailed.accept(reason);
    return true;
  }

  /**
   * Sends the next rank an ABORT frame with the reason, first completing (with zeros) a frame
   * left half-written, within {@link #ABORT_NANOS}; the next rank then fails with these words.
   */
  private void passOn(String reason) {
    try {
      if (!writeLock.tryLock(ABORT_NANOS, TimeUnit.NANOSECONDS)) {
        return;
      }
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      return;
    }
    try {
      byte[] words = reason.getBytes(StandardCharsets.UTF_8);
      ByteBuffer abort = ByteBuffer.allocate(HEADER + words.length).order(ByteOrder.LITTLE_ENDIAN);
      abort.putInt(ABORT).putInt(-1).putInt(-1).putInt(words.length).put(words).flip();
      ByteBuffer[] frames = {keepAlive, writeHeader, ByteBuffer.allocate(openFrame), abort};
      long deadline = System.nanoTime() + ABORT_NANOS;
      while (abort.hasRemaining() && System.nanoTime() < deadline) {
        if (toNext.write(frames) == 0) {
          LockSupport.parkNanos(20_000);
        }
      }
      toNext.flush(deadline);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    } catch (IOException e) {
      log.debug("could not pass the abort on to {}: {}", nextTask, e.toString());
    } finally {
      writeLock.unlock();
    }
  }

  /** The group's failure, as every call after it throws it: the first reason, with its cause. */
  private CollectiveException failure() {
    Failure first = failure.get();
    return new CollectiveException("Collective ops is aborted by: " + first.reason()
        + "\nThe error could be from a previous operation. Restart your program to reset.", first.cause());
  }

  boolean failed() {
    return failure.get() != null;
  }

  @Override
  public void close() {
    // the read stream first: the previous rank's written stream waits for this end to close
    closeQuietly(fromPrev);
    try {
      toNext.closeAfterPeer();
    } catch (IOException e) {
      log.debug("closing the collective stream to {}: {}", nextTask, e.toString());
    }
  }

  private static void closeQuietly(RingStream stream) {
    try {
      stream.close();
    } catch (IOException e) {
      // already broken
    }
  }
}
