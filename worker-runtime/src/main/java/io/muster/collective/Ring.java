package io.muster.collective;

import io.muster.cluster.TaskId;
import io.muster.internal.Interrupts;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.channels.ClosedByInterruptException;
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.LockSupport;
import java.util.concurrent.locks.ReentrantLock;
import java.util.function.Consumer;
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
 *
 * <p>One file because the framing, the abort frames, the keepalives and the transfer loop all work
 * the same two non-blocking streams and their buffers, and must agree on what a half-written frame
 * means; the rendezvous ({@link RingSetup}) and the first-failure state ({@link RingFailure}) hold
 * none of that and are apart.
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
  private final RingFailure failure = new RingFailure(this::stopAfterFailure);
  volatile long lastProgressNanos = System.nanoTime();

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

  Ring(TaskId self, TaskId prevTask, TaskId nextTask, RingStream toNext, RingStream fromPrev,
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

  TaskId prev() {
    return prevTask;
  }

  /** Whether a rank polling this ring yields its core: more ranks on this host than cores. */
  boolean sharesCores() {
    return yieldWhilePolling;
  }

  /** What is told of every failure of this ring: see {@link RingFailure#onFailed}. */
  void onFailed(Consumer<String> action) {
    failure.onFailed(action);
  }

  /** Who is told of a failure this rank saw first: see {@link RingFailure#onFailure}. */
  void onFailure(RingFailure.Listener listener) {
    failure.onFailure(listener);
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
    while (!failure.happened() && System.nanoTime() < grace && !interrupted(e)) {
      LockSupport.parkNanos(TimeUnit.MILLISECONDS.toNanos(5));
    }
    if (failure.happened()) {
      return failure.exception();
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
      if (failure.happened() || openFrame > 0 || writeHeader.hasRemaining() || keepAlive.hasRemaining()) {
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
    failure.check();
  }

  /**
   * Fails the group for a cause this rank saw itself (a broken stream, a peer out of step, no
   * data for the timeout), and tells the listener; {@code brokenPeer} is the neighbour whose
   * stream broke, or null.
   */
  CollectiveException failSeen(String reason, TaskId brokenPeer, Throwable cause) {
    return failure.seen(reason, brokenPeer, cause);
  }

  /** Fails the group (the first reason wins); see {@link RingFailure}. */
  CollectiveException fail(String reason, Throwable cause) {
    return failure.fail(reason, cause);
  }

  boolean failed() {
    return failure.happened();
  }

  /**
   * On the first failure: stops reading, passes the reason to the next rank in an ABORT frame
   * when the stream is free, closes both streams and wakes the thread in {@link #transfer}.
   */
  private void stopAfterFailure(String reason) {
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
  }

  /**
   * Sends the next rank an ABORT frame with the reason, first completing (with zeros) a frame
   * left half-written, within {@link #ABORT_NANOS}; the next rank then fails with these words.
   */
  private void passOn(String reason) {
    // A killed task's thread comes here interrupted, and its abort is what ends the others at once
    // (without it they wait out BROKEN_GRACE_NANOS): it goes out within its bound, the interrupt kept.
    Interrupts.setAsideWhile(() -> passOnWithin(reason));
  }

  private void passOnWithin(String reason) {
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
