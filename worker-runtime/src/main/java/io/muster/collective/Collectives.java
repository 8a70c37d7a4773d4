package io.muster.collective;

import io.muster.cluster.TaskId;
import io.muster.coordination.KeyValues;
import io.muster.internal.rpc.BindAddresses;
import io.muster.rpc.Security;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.function.BiConsumer;
import java.util.function.Consumer;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * All-reduce, all-gather and broadcast over the chief and workers of a job, ranked by
 * {@code id_in_cluster}, on TensorFlow's ring algorithms, and for all-reduces on 4, 8, 16...
 * ranks on Open MPI's choices for them: recursive doubling, and recursive halving and doubling.
 *
 * <p>Every rank must call the same collectives in the same order with the same sizes (all-gather
 * contributions may differ in length); a rank that does not is detected and the group fails. Calls
 * block until this rank has its result, and every rank gets bitwise-identical results: each element
 * is reduced in one order fixed by the rank count and the size, the same on every rank.
 * A group fails when a peer dies (at once: its stream closes), when the stream a call waits on
 * stays silent for the timeout, or when {@link #abort} is called (the strategy calls it when the
 * coordination service declares a task failed); the failure reaches every rank, and every later
 * call throws the first cause. A rank that is alive keeps its streams from going silent (a
 * keepalive every quarter of the timeout when it has nothing to send), so a rank busy between
 * collectives, saving a checkpoint or reading its data, holds the others up but does not fail
 * them; a frozen process or a host cut off does. Calls on one instance are serialised.
 *
 * <p>One file because it is the one facade every caller sees: each public call checks its
 * arguments, announces itself to the watchdog and chooses an algorithm; the algorithms
 * ({@link AllReduceAlgorithms}), the watchdog ({@link CollectiveWatchdog}) and the streams
 * ({@link Ring}) are apart.
 */
public final class Collectives implements AutoCloseable {

  /**
   * How an all-reduce moves its data, chosen by its size (so every rank chooses the same).
   * Each gives every rank the same bits, each element reduced in one order fixed by the rank count.
   */
  public enum Algorithm {
    /**
     * Every rank's data goes around the ring once (n - 1 steps), then every rank combines the n
     * contributions in rank order. Fewest steps, most bytes: for small buffers.
     */
    GATHER,
    /**
     * TensorFlow's ring: reduce-scatter then all-gather, 2(n - 1) steps of 1/n of the buffer. Each
     * chunk is reduced in one fixed order around the ring, finished on one rank and copied to the
     * others. Fewest bytes: for large buffers, on rank counts that are not 4, 8, 16...
     */
    RING,
    /**
     * log2(n) steps (n a power of two): exchange the whole buffer with the rank at distance 1, 2,
     * 4..., each pair over streams of its own, and combine the two, the lower rank's first; ranks
     * ((0 1) (2 3)) ... Fewest steps, and pairs that move at once: for small buffers on 4, 8, 16...
     * ranks. Measured on 4 ranks on 2 cores at 4 KiB: 2-3 times as fast as the gather, in C as in Java.
     */
    RECURSIVE_DOUBLING,
    /**
     * Rabenseifner's (n a power of two): a reduce-scatter by recursive halving, where each of
     * log2(n) steps sends the rank at distance 1, 2, 4... half of what this rank still holds and
     * reduces the other half with the partner's, then an all-gather that runs the steps back.
     * The ring's bytes in 2 log2(n) steps instead of 2(n - 1), the pairs moving at once: Open MPI's
     * choice for larger buffers on 4 or more ranks. Each element is finished on one rank, in the
     * pairs' tree as in recursive doubling, and copied to the others. Measured on 4 ranks on 2
     * cores against the ring: 2.3 times as fast at 256 KiB, up to 1.4 at 1 MiB, 1.1 at 16 MiB.
     */
    HALVING_DOUBLING
  }

  /**
   * Largest all-reduce, in bytes, that goes by {@link Algorithm#GATHER}. Measured on 2 and 4 ranks
   * over loopback: at 64 KiB the gather is faster, from 128 KiB the ring, on 2 ranks too, where both
   * send the same bytes (the ring reduces half as much, while its chunks are on the wire).
   */
  static final int GATHER_BYTES = 64 << 10;
  /**
   * Largest all-reduce, in bytes, that goes by {@link Algorithm#RECURSIVE_DOUBLING} where it can.
   * Measured on 4 ranks on 2 cores, alternating the two: recursive doubling as fast or faster up to
   * 8 KiB, halving and doubling 1.3 times as fast at 64 KiB; at 16 KiB either was faster in turn.
   */
  static final int RECURSIVE_DOUBLING_BYTES = 16 << 10;
  private static final Logger log = LoggerFactory.getLogger(Collectives.class);

  private final CollectiveGroup group;
  /** The ring every collective but an all-reduce on partners goes around; null for a group of one. */
  private final Ring ring;
  /** {@link #ring} and, with 4, 8, 16... ranks, the pairs' rings: a failure of one fails all. */
  private final List<Ring> rings;
  private final CollectiveWatchdog watchdog;
  private final AllReduceAlgorithms algorithms;
  private ByteBuffer work = ByteBuffer.allocateDirect(0);
  /** What {@link #whenFailed} was given, until the group fails. */
  private final List<Consumer<String>> failureActions = new ArrayList<>();
  /** The reason the group failed, once it has; guarded by failureActions. */
  private String failedFor;

  private Collectives(CollectiveGroup group, Ring ring, List<Ring> partners, Duration timeout) {
    this.group = group;
    this.ring = ring;
    List<Ring> all = new ArrayList<>();
    if (ring != null) {
      all.add(ring);
      all.addAll(partners);
    }
    this.rings = List.copyOf(all);
    for (Ring r : rings) {
      r.onFailed(reason -> {
        rings.forEach(other -> other.fail(reason, null));
        groupFailed(reason);
      });
    }
    this.watchdog = new CollectiveWatchdog(group, rings, timeout);
    this.algorithms = new AllReduceAlgorithms(group, ring, partners, watchdog);
  }

  /**
   * Joins the group's ring: listens on {@code advertisedHost} (an ephemeral port, published through
   * the coordination service before anyone connects to it), connects to the next rank and accepts
   * the previous one, all within the timeout.
   *
   * @param advertisedHost the host peers reach this task at (its {@code TF_CONFIG} host)
   * @param security the job token every stream opens with, and TLS for the streams when configured
   *     (the task server's certificate and trusted certificates)
   * @param timeout how long a collective may wait on a silent stream (no data, no keepalive); also
   *     the set-up deadline
   */
  public static Collectives create(CollectiveGroup group, String name, String advertisedHost, KeyValues agent,
      Security security, CommunicationOptions options, Duration timeout) {
    if (options.implementation() == CommunicationOptions.Implementation.NCCL) {
      log.warn("NCCL was asked for, but Muster's NCCL path is not available on this host (no GPU support built); "
          + "running collectives on the RING implementation");
    }
    if (group.size() == 1) {
      return new Collectives(group, null, List.of(), timeout);
    }
    InetSocketAddress bind = BindAddresses.forHost(group.self(), new io.muster.cluster.HostPort(advertisedHost, 0));
    List<Ring> opened = new ArrayList<>();
    try {
      Ring ring = RingSetup.connect(group, name, advertisedHost, bind, agent, security, timeout, false);
      opened.add(ring);
      int n = group.size();
      if (n >= 4 && Integer.bitCount(n) == 1) {
        for (int distance = 1; distance < n; distance <<= 1) { // every rank in the same order: no one waits in a cycle
          int low = Math.min(group.rank(), group.rank() ^ distance);
          CollectiveGroup pair = new CollectiveGroup(List.of(group.member(low), group.member(low + distance)),
              group.rank() == low ? 0 : 1);
          opened.add(RingSetup.connect(pair, name + "/pair-" + low + "-" + (low + distance), advertisedHost, bind, agent,
              security, timeout, ring.sharesCores()));
        }
      }
      return new Collectives(group, ring, opened.subList(1, opened.size()), timeout);
    } catch (IOException e) {
      opened.forEach(Ring::close);
      throw new UncheckedIOException(group.self() + " could not set up the collective ring: " + e.getMessage(), e);
    } catch (RuntimeException e) {
      opened.forEach(Ring::close);
      throw e;
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
    int mySeq = watchdog.begin("all-reduce of " + count + " " + type + " (" + op + ")");
    try {
      if (group.size() == 1) {
        return;
      }
      algorithms.allReduce(mySeq, buffer, type, op);
    } finally {
      watchdog.end();
    }
  }

  /** The algorithm an all-reduce of {@code bytes} takes in this group. */
  public Algorithm algorithm(long bytes) {
    return algorithms.choose(bytes);
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

  // ---- all-gather -----------------------------------------------------------------------------

  /**
   * Every rank's bytes (position to limit of {@code mine}), concatenated in rank order. Ranks may
   * contribute different lengths.
   */
  public synchronized ByteBuffer allGather(ByteBuffer mine) {
    int n = group.size();
    int r = group.rank();
    ByteBuffer lengths = ByteBuffer.allocateDirect(8 * n).order(ByteOrder.LITTLE_ENDIAN);
    lengths.putLong(8 * r, mine.remaining());
    ByteBuffer[] lengthBlocks = new ByteBuffer[n];
    for (int i = 0; i < n; i++) {
      lengthBlocks[i] = AllReduceAlgorithms.slice(lengths, 8 * i, 8);
    }
    ringGather(lengthBlocks, "all-gather of lengths");
    long total = 0;
    for (int i = 0; i < n; i++) {
      total += lengths.getLong(8 * i);
    }
    if (total > Integer.MAX_VALUE) {
      throw new IllegalArgumentException("all-gather result of " + total + " bytes exceeds 2 GiB");
    }
    ByteBuffer out = ByteBuffer.allocateDirect((int) total).order(ByteOrder.LITTLE_ENDIAN);
    ByteBuffer[] blocks = new ByteBuffer[n];
    int offset = 0;
    for (int i = 0; i < n; i++) {
      int size = (int) lengths.getLong(8 * i);
      blocks[i] = AllReduceAlgorithms.slice(out, offset, size);
      offset += size;
    }
    out.put(blocks[r].position(), mine.duplicate(), mine.position(), mine.remaining());
    ringGather(blocks, "all-gather of " + total + " bytes");
    return out;
  }

  private void ringGather(ByteBuffer[] blocks, String what) {
    int mySeq = watchdog.begin(what);
    try {
      if (group.size() > 1) {
        algorithms.ringGather(mySeq, blocks, what);
      }
    } finally {
      watchdog.end();
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
   * same length on every rank. The data flows down the ring from the root, each rank passing bytes on as they arrive.
   */
  public synchronized void broadcast(ByteBuffer data, int root) {
    int n = group.size();
    if (root < 0 || root >= n) {
      throw new IllegalArgumentException("broadcast root must be a rank in 0.." + (n - 1) + ", was " + root);
    }
    ByteBuffer buffer = data.slice();
    int mySeq = watchdog.begin("broadcast of " + buffer.remaining() + " bytes from rank " + root);
    try {
      if (n == 1) {
        return;
      }
      // position p receives step p - 1 and passes it on as step p, as it arrives
      int position = Math.floorMod(group.rank() - root, n);
      List<Ring.Send> sends = position == n - 1 ? List.of() : List.of(new Ring.Send(position, buffer, position > 0 ? 0 : -1));
      List<Ring.Receive> receives = position == 0 ? List.of() : List.of(Ring.Receive.copy(position - 1, buffer));
      ring.transfer(mySeq, sends, receives, watchdog.current());
    } finally {
      watchdog.end();
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
    AtomicBoolean told = new AtomicBoolean(); // two of the rings may each see a failure first
    for (Ring r : rings) {
      r.onFailure((reason, peer) -> {
        if (told.compareAndSet(false, true)) {
          listener.accept(reason, Optional.ofNullable(peer));
        }
      });
    }
  }

  /**
   * Gives {@code action} the reason once the group fails, whatever the cause (a peer, the timeout,
   * the coordination service, {@link #abort}), on the thread that failed it; at once when it has
   * failed already. For short actions: a launcher uses it to bound how long a failed task takes to
   * leave.
   */
  public void whenFailed(Consumer<String> action) {
    String reason;
    synchronized (failureActions) {
      if (failedFor == null) {
        failureActions.add(action);
        return;
      }
      reason = failedFor;
    }
    action.accept(reason);
  }

  private void groupFailed(String reason) {
    List<Consumer<String>> actions;
    synchronized (failureActions) {
      if (failedFor != null) {
        return;
      }
      failedFor = reason;
      actions = List.copyOf(failureActions);
    }
    actions.forEach(a -> a.accept(reason));
  }

  /** Whether the group has failed (every later call throws). */
  public boolean failed() {
    return ring != null && ring.failed();
  }

  /** Fails the group on every rank (reachable ones hear it through the ring); later calls throw {@code reason}. */
  public void abort(String reason) {
    abort(reason, null);
  }

  /** {@link #abort(String)}, with what caused it as the cause of what later calls throw. */
  public void abort(String reason, Throwable cause) {
    if (ring != null) {
      ring.fail(reason, cause);
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
    watchdog.close();
    rings.forEach(Ring::close);
  }
}
