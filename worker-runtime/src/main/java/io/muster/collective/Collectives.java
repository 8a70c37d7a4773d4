package io.muster.collective;

import io.muster.cluster.TaskId;
import io.muster.coordination.CoordinationAgent;
import io.muster.rpc.BindAddresses;
import io.muster.rpc.Security;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.time.Duration;
import java.util.Optional;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.function.BiConsumer;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * All-reduce, all-gather and broadcast over the chief and workers of a job, ranked by
 * {@code id_in_cluster}, on TensorFlow's ring algorithms.
 *
 * <p>Every rank must call the same collectives in the same order with the same sizes (all-gather
 * contributions may differ in length); a rank that does not is detected and the group fails. Calls
 * block until this rank has its result, and every rank gets bitwise-identical results: each chunk
 * is reduced in one fixed order around the ring, finished on one rank, and copied to the others.
 * A group fails when a peer dies (at once: its stream closes), when no data arrives for the
 * timeout, or when {@link #abort} is called (the strategy calls it when the coordination service
 * declares a task failed); the failure reaches every rank, and every later call throws the
 * first cause. Calls on one instance are serialised.
 */
public final class Collectives implements AutoCloseable {

  /**
   * Frames up to this size are written by the calling thread; larger ones are pipelined in pieces.
   * All-reduces up to this size run as all-gather plus a local reduction.
   */
  static final int INLINE_BYTES = 64 << 10;
  /** Piece size for pipelined transfers: sending, receiving and reducing overlap piece by piece. */
  static final int PIECE_BYTES = 256 << 10;
  private static final Logger log = LoggerFactory.getLogger(Collectives.class);

  private final CollectiveGroup group;
  private final Ring ring;
  private final Duration timeout;
  private final ScheduledExecutorService watchdog;
  private ByteBuffer work = ByteBuffer.allocateDirect(0);
  private ByteBuffer gathered = ByteBuffer.allocateDirect(0);
  private final ByteBuffer staging = ByteBuffer.allocateDirect(PIECE_BYTES).order(ByteOrder.LITTLE_ENDIAN);
  private int seq;
  private volatile String currentOp;

  private Collectives(CollectiveGroup group, Ring ring, Duration timeout) {
    this.group = group;
    this.ring = ring;
    this.timeout = timeout;
    if (ring == null) {
      this.watchdog = null;
      return;
    }
    this.watchdog = Executors.newSingleThreadScheduledExecutor(r -> {
      Thread t = new Thread(r, "muster-collective-watchdog-" + group.self().job() + "-" + group.self().index());
      t.setDaemon(true);
      return t;
    });
    long period = Math.max(50, timeout.toMillis() / 4);
    watchdog.scheduleAtFixedRate(this::checkProgress, period, period, TimeUnit.MILLISECONDS);
  }

  /**
   * Joins the group's ring: listens on {@code advertisedHost} (an ephemeral port, published through
   * the coordination service before anyone connects to it), connects to the next rank and accepts
   * the previous one, all within the timeout.
   *
   * @param advertisedHost the host peers reach this task at (its {@code TF_CONFIG} host)
   * @param security the job token every stream opens with, and TLS for the streams when configured
   *     (the task server's certificate and trusted certificates)
   * @param timeout how long a collective may go without receiving data; also the set-up deadline
   */
  public static Collectives create(CollectiveGroup group, String name, String advertisedHost, CoordinationAgent agent,
      Security security, CommunicationOptions options, Duration timeout) {
    if (options.implementation() == CommunicationOptions.Implementation.NCCL) {
      log.warn("NCCL was asked for, but Muster's NCCL path is not available on this host (no GPU support built); "
          + "running collectives on the RING implementation");
    }
    if (group.size() == 1) {
      return new Collectives(group, null, timeout);
    }
    try {
      Ring ring = Ring.connect(group, name, advertisedHost,
          BindAddresses.forHost(group.self(), new io.muster.cluster.HostPort(advertisedHost, 0)), agent, security, timeout);
      return new Collectives(group, ring, timeout);
    } catch (IOException e) {
      throw new UncheckedIOException(group.self() + " could not set up the collective ring: " + e.getMessage(), e);
    }
  }

  public int rank() {
    return group.rank();
  }

  public int size() {
    return group.size();
  }

  public CollectiveGroup group() {
    return group;
  }

  // ---- all-reduce -----------------------------------------------------------------------------

  /**
   * Reduces the buffer's elements (position to limit) across all ranks, in place. The buffer must
   * be little-endian; a direct buffer avoids a copy inside the socket layer.
   */
  public synchronized void allReduce(ByteBuffer data, DataType type, ReduceOp op) {
    if (data.order() != ByteOrder.LITTLE_ENDIAN) {
      throw new IllegalArgumentException("all-reduce buffer must be little-endian: call buffer.order(ByteOrder.LITTLE_ENDIAN)");
    }
    if (data.remaining() % type.bytes() != 0) {
      throw new IllegalArgumentException("all-reduce buffer holds " + data.remaining() + " bytes, not a whole number of "
          + type + " elements");
    }
    ByteBuffer buffer = data.slice().order(ByteOrder.LITTLE_ENDIAN);
    int count = buffer.remaining() / type.bytes();
    int n = group.size();
    if (n > 1 && buffer.remaining() <= INLINE_BYTES) {
      allReduceByGather(buffer, type, op, count);
      return;
    }
    int mySeq = begin("all-reduce of " + count + " " + type + " (" + op + ")");
    try {
      if (n == 1) {
        return;
      }
      int r = group.rank();
      int chunk = (count + n - 1) / n;
      int es = type.bytes();
      boolean inline = (long) chunk * es <= INLINE_BYTES;
      int steps = 2 * (n - 1);
      if (!inline) {
        sendChunkPieces(mySeq, 0, buffer, chunkOffset(r, chunk, count) * es, chunkLength(r, chunk, count) * es);
      }
      for (int t = 0; t < steps; t++) {
        boolean reduce = t < n - 1;
        boolean finish = t == n - 2 && op == ReduceOp.MEAN;
        int sendC = reduce ? r - t : r + 1 - (t - (n - 1));
        int recvC = reduce ? r - t - 1 : r - (t - (n - 1));
        int recvOff = chunkOffset(recvC, chunk, count) * es;
        int recvLen = chunkLength(recvC, chunk, count) * es;
        if (inline) {
          int sendOff = chunkOffset(sendC, chunk, count) * es;
          ring.send(mySeq, t, slice(buffer, sendOff, chunkLength(sendC, chunk, count) * es));
          receivePiece(mySeq, t, type, op, buffer, recvOff, recvLen, reduce, finish);
          continue;
        }
        for (int p = 0; p < recvLen; p += PIECE_BYTES) {
          int len = Math.min(PIECE_BYTES, recvLen - p);
          receivePiece(mySeq, t, type, op, buffer, recvOff + p, len, reduce, finish);
          if (t + 1 < steps) {
            ring.enqueue(mySeq, t + 1, slice(buffer, recvOff + p, len));
          }
        }
      }
      ring.awaitSent();
    } finally {
      end();
    }
  }

  public synchronized void allReduce(float[] data, ReduceOp op) {
    ByteBuffer w = work(data.length * 4L);
    w.asFloatBuffer().put(data);
    allReduce(w, DataType.FLOAT32, op);
    w.asFloatBuffer().get(data);
  }

  public synchronized void allReduce(double[] data, ReduceOp op) {
    ByteBuffer w = work(data.length * 8L);
    w.asDoubleBuffer().put(data);
    allReduce(w, DataType.FLOAT64, op);
    w.asDoubleBuffer().get(data);
  }

  public synchronized void allReduce(int[] data, ReduceOp op) {
    ByteBuffer w = work(data.length * 4L);
    w.asIntBuffer().put(data);
    allReduce(w, DataType.INT32, op);
    w.asIntBuffer().get(data);
  }

  public synchronized void allReduce(long[] data, ReduceOp op) {
    ByteBuffer w = work(data.length * 8L);
    w.asLongBuffer().put(data);
    allReduce(w, DataType.INT64, op);
    w.asLongBuffer().get(data);
  }

  /**
   * Small all-reduce: every rank's data goes around the ring once (n - 1 steps instead of the
   * ring algorithm's 2(n - 1), which is what latency is made of at this size), then every rank
   * combines the n contributions in rank order, so all get bitwise-identical results.
   */
  private void allReduceByGather(ByteBuffer buffer, DataType type, ReduceOp op, int count) {
    int n = group.size();
    int bytes = buffer.remaining();
    if (gathered.capacity() < n * bytes) {
      gathered = ByteBuffer.allocateDirect(n * bytes).order(ByteOrder.LITTLE_ENDIAN);
    }
    ByteBuffer all = gathered.clear().order(ByteOrder.LITTLE_ENDIAN);
    int[] offsets = new int[n];
    int[] sizes = new int[n];
    for (int i = 0; i < n; i++) {
      offsets[i] = i * bytes;
      sizes[i] = bytes;
    }
    all.put(group.rank() * bytes, buffer, 0, bytes);
    ringGather(all, offsets, sizes, "all-reduce of " + count + " " + type + " (" + op + ")");
    for (int i = 1; i < n; i++) {
      Reductions.combine(type, op, all, 0, all, i * bytes, count);
    }
    if (op == ReduceOp.MEAN) {
      Reductions.divide(type, all, 0, count, n);
    }
    buffer.put(0, all, 0, bytes);
  }

  /** Receives {@code len} bytes for {@code buffer[at..]}: reduced into it, or copied over it. */
  private void receivePiece(int mySeq, int step, DataType type, ReduceOp op, ByteBuffer buffer, int at, int len,
      boolean reduce, boolean finish) {
    if (!reduce) {
      ring.receive(mySeq, step, slice(buffer, at, len), currentOp);
      return;
    }
    staging.clear().limit(len);
    ring.receive(mySeq, step, staging, currentOp);
    Reductions.combine(type, op, buffer, at, staging, 0, len / type.bytes());
    if (finish) {
      Reductions.divide(type, buffer, at, len / type.bytes(), group.size());
    }
  }

  private static ByteBuffer slice(ByteBuffer buffer, int at, int len) {
    return buffer.duplicate().limit(at + len).position(at);
  }

  /** Ring chunk {@code c} (any integer, taken mod n) of {@code count} elements split in chunks of {@code chunk}. */
  private int chunkOffset(int c, int chunk, int count) {
    return (int) Math.min(count, (long) Math.floorMod(c, group.size()) * chunk);
  }

  private int chunkLength(int c, int chunk, int count) {
    int start = chunkOffset(c, chunk, count);
    return (int) Math.min(count, (long) start + chunk) - start;
  }

  private void sendChunkPieces(int mySeq, int step, ByteBuffer buffer, int off, int len) {
    for (int p = 0; p < len; p += PIECE_BYTES) {
      int at = off + p;
      ring.enqueue(mySeq, step, slice(buffer, at, Math.min(PIECE_BYTES, len - p)));
    }
  }

  // ---- all-gather -----------------------------------------------------------------------------

  /**
   * Every rank's bytes (position to limit of {@code mine}), concatenated in rank order. Ranks may
   * contribute different lengths.
   */
  public synchronized ByteBuffer allGather(ByteBuffer mine) {
    int n = group.size();
    int r = group.rank();
    int[] lengthOffsets = new int[n];
    int[] lengthSizes = new int[n];
    for (int i = 0; i < n; i++) {
      lengthOffsets[i] = 8 * i;
      lengthSizes[i] = 8;
    }
    ByteBuffer lengths = ByteBuffer.allocateDirect(8 * n).order(ByteOrder.LITTLE_ENDIAN);
    lengths.putLong(8 * r, mine.remaining());
    ringGather(lengths, lengthOffsets, lengthSizes, "all-gather of lengths");
    int[] offsets = new int[n];
    int[] sizes = new int[n];
    long total = 0;
    for (int i = 0; i < n; i++) {
      sizes[i] = (int) lengths.getLong(8 * i);
      offsets[i] = (int) total;
      total += sizes[i];
    }
    if (total > Integer.MAX_VALUE) {
      throw new IllegalArgumentException("all-gather result of " + total + " bytes exceeds 2 GiB");
    }
    ByteBuffer out = ByteBuffer.allocateDirect((int) total).order(ByteOrder.LITTLE_ENDIAN);
    out.position(offsets[r]).put(mine.duplicate()).clear();
    ringGather(out, offsets, sizes, "all-gather of " + total + " bytes");
    return out;
  }

  /** Ring all-gather: rank i's block is {@code out[offsets[i], offsets[i] + sizes[i])}. */
  private void ringGather(ByteBuffer out, int[] offsets, int[] sizes, String what) {
    int n = group.size();
    int mySeq = begin(what);
    try {
      if (n == 1) {
        return;
      }
      int r = group.rank();
      boolean inline = java.util.Arrays.stream(sizes).max().orElse(0) <= INLINE_BYTES;
      if (!inline) {
        sendChunkPieces(mySeq, 0, out, offsets[r], sizes[r]);
      }
      for (int t = 0; t < n - 1; t++) {
        int sendC = Math.floorMod(r - t, n);
        int recvC = Math.floorMod(r - t - 1, n);
        if (inline) {
          ring.send(mySeq, t, slice(out, offsets[sendC], sizes[sendC]));
          ring.receive(mySeq, t, slice(out, offsets[recvC], sizes[recvC]), currentOp);
          continue;
        }
        for (int p = 0; p < sizes[recvC]; p += PIECE_BYTES) {
          ByteBuffer piece = slice(out, offsets[recvC] + p, Math.min(PIECE_BYTES, sizes[recvC] - p));
          ring.receive(mySeq, t, piece.duplicate(), currentOp);
          if (t + 1 < n - 1) {
            ring.enqueue(mySeq, t + 1, piece);
          }
        }
      }
      ring.awaitSent();
    } finally {
      end();
    }
  }

  public float[] allGather(float[] mine) {
    ByteBuffer in = ByteBuffer.allocateDirect(mine.length * 4).order(ByteOrder.LITTLE_ENDIAN);
    in.asFloatBuffer().put(mine);
    ByteBuffer all = allGather(in);
    float[] out = new float[all.remaining() / 4];
    all.asFloatBuffer().get(out);
    return out;
  }

  public long[] allGather(long[] mine) {
    ByteBuffer in = ByteBuffer.allocateDirect(mine.length * 8).order(ByteOrder.LITTLE_ENDIAN);
    in.asLongBuffer().put(mine);
    ByteBuffer all = allGather(in);
    long[] out = new long[all.remaining() / 8];
    all.asLongBuffer().get(out);
    return out;
  }

  // ---- broadcast ------------------------------------------------------------------------------

  /**
   * Copies the root's bytes (position to limit) into every rank's buffer, which must be of the
   * same length on every rank. The data flows down the ring from the root, pipelined in pieces.
   */
  public synchronized void broadcast(ByteBuffer data, int root) {
    int n = group.size();
    if (root < 0 || root >= n) {
      throw new IllegalArgumentException("broadcast root must be a rank in 0.." + (n - 1) + ", was " + root);
    }
    ByteBuffer buffer = data.slice();
    int mySeq = begin("broadcast of " + buffer.remaining() + " bytes from rank " + root);
    try {
      if (n == 1) {
        return;
      }
      int position = Math.floorMod(group.rank() - root, n);
      int len = buffer.remaining();
      boolean last = position == n - 1;
      if (len <= INLINE_BYTES) {
        if (position > 0) {
          ring.receive(mySeq, 0, buffer.duplicate(), currentOp);
        }
        if (!last) {
          ring.send(mySeq, 0, buffer.duplicate());
        }
      } else if (position == 0) {
        sendChunkPieces(mySeq, 0, buffer, 0, len);
      } else {
        for (int p = 0; p < len; p += PIECE_BYTES) {
          ByteBuffer piece = slice(buffer, p, Math.min(PIECE_BYTES, len - p));
          ring.receive(mySeq, 0, piece.duplicate(), currentOp);
          if (!last) {
            ring.enqueue(mySeq, 0, piece);
          }
        }
      }
      ring.awaitSent();
    } finally {
      end();
    }
  }

  public synchronized void broadcast(float[] data, int root) {
    ByteBuffer w = work(data.length * 4L);
    w.asFloatBuffer().put(data);
    broadcast(w, root);
    w.asFloatBuffer().get(data);
  }

  public synchronized void broadcast(double[] data, int root) {
    ByteBuffer w = work(data.length * 8L);
    w.asDoubleBuffer().put(data);
    broadcast(w, root);
    w.asDoubleBuffer().get(data);
  }

  // ---- failure and lifecycle ------------------------------------------------------------------

  /**
   * Tells {@code listener} once, on the thread that saw it, when this rank sees the group fail
   * first: a neighbour's stream broke ({@code brokenPeer} names it), a peer out of step, no data
   * for the timeout. Not for a failure passed on by another rank or made by {@link #abort}: those
   * are known elsewhere already. The strategy reports it to the coordination service.
   */
  public void onFailure(BiConsumer<String, Optional<TaskId>> listener) {
    if (ring != null) {
      ring.onFailure((reason, peer) -> listener.accept(reason, Optional.ofNullable(peer)));
    }
  }

  /** Whether the group has failed (every later call throws). */
  public boolean failed() {
    return ring != null && ring.failed();
  }

  /** Fails the group on every rank (reachable ones hear it through the ring); later calls throw {@code reason}. */
  public void abort(String reason) {
    if (ring != null) {
      ring.fail(reason, null);
    }
  }

  private int begin(String what) {
    if (ring != null) {
      ring.check();
      ring.lastProgressNanos = System.nanoTime();
    }
    currentOp = what;
    return seq++;
  }

  private void end() {
    currentOp = null;
  }

  private void checkProgress() {
    String op = currentOp;
    if (op == null || ring.failed()) {
      return;
    }
    long silent = System.nanoTime() - ring.lastProgressNanos;
    if (silent > timeout.toNanos()) {
      ring.failSeen(group.self() + ": " + op + " timed out: no data from " + ring.prev() + " for "
          + TimeUnit.NANOSECONDS.toMillis(silent) + " ms (timeout " + timeout + ")", null, null);
    }
  }

  /** A cached little-endian direct buffer of {@code bytes}, for array arguments. */
  private ByteBuffer work(long bytes) {
    if (bytes > Integer.MAX_VALUE) {
      throw new IllegalArgumentException("collective buffers are limited to 2 GiB, was " + bytes + " bytes");
    }
    if (work.capacity() < bytes) {
      work = ByteBuffer.allocateDirect((int) bytes).order(ByteOrder.LITTLE_ENDIAN);
    }
    return work.clear().limit((int) bytes).order(ByteOrder.LITTLE_ENDIAN);
  }

  @Override
  public void close() {
    if (watchdog != null) {
      watchdog.shutdownNow();
    }
    if (ring != null) {
      ring.close();
    }
  }
}
