package io.muster.collective;

import io.muster.collective.Collectives.Algorithm;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.ArrayList;
import java.util.List;

/**
 * The four ways an all-reduce moves its data ({@link Algorithm}), and the ring all-gather the
 * gather algorithm and {@link Collectives#allGather} share. Each gives every rank the same bits:
 * every element is reduced in one order fixed by the rank count and the buffer's size.
 */
final class AllReduceAlgorithms {

  private final CollectiveGroup group;
  private final Ring ring;
  /** With 4, 8, 16... ranks: the streams to the rank at distance 1, 2, 4..., as rings of two; else empty. */
  private final List<Ring> partners;
  private final CollectiveWatchdog watchdog;
  /** Scratch space for the other ranks' data, kept between calls. */
  private ByteBuffer gathered = ByteBuffer.allocateDirect(0);

  AllReduceAlgorithms(CollectiveGroup group, Ring ring, List<Ring> partners, CollectiveWatchdog watchdog) {
    this.group = group;
    this.ring = ring;
    this.partners = List.copyOf(partners);
    this.watchdog = watchdog;
  }

  /** The algorithm an all-reduce of {@code bytes} takes in this group. */
  Algorithm choose(long bytes) {
    if (partners.isEmpty()) {
      return bytes > Collectives.GATHER_BYTES ? Algorithm.RING : Algorithm.GATHER;
    }
    return bytes > Collectives.RECURSIVE_DOUBLING_BYTES ? Algorithm.HALVING_DOUBLING : Algorithm.RECURSIVE_DOUBLING;
  }

  /** Reduces {@code buffer} (little-endian, position to limit) in place, as collective {@code seq}. */
  void allReduce(int seq, ByteBuffer buffer, DataType type, ReduceOp op) {
    switch (choose(buffer.remaining())) {
      case GATHER -> gatherReduce(seq, buffer, type, op);
      case RECURSIVE_DOUBLING -> recursiveDoubling(seq, buffer, type, op);
      case HALVING_DOUBLING -> halvingDoubling(seq, buffer, type, op);
      case RING -> ringReduce(seq, buffer, type, op);
    }
  }

  /**
   * {@link Algorithm#HALVING_DOUBLING}: halving step k exchanges with the rank at distance 2^k, over
   * partner ring k, and the rank whose bit k is clear keeps the lower half of the elements both
   * hold; then the doubling steps run the distances back down, each pair swapping what it holds.
   * The pairs are those of recursive doubling, in the same order, so an element is summed in the
   * same tree whichever of the two its buffer's size takes.
   */
  private void halvingDoubling(int seq, ByteBuffer buffer, DataType type, ReduceOp op) {
    int es = type.bytes();
    int steps = partners.size();
    // after halving step k, this rank holds elements [from[k + 1], to[k + 1]), reduced over the
    // 2^(k+1) ranks whose ranks differ from this one in bits 0..k only
    int[] from = new int[steps + 1];
    int[] to = new int[steps + 1];
    to[0] = buffer.remaining() / es;
    for (int k = 0; k < steps; k++) {
      int middle = from[k] + (to[k] - from[k]) / 2;
      boolean keepLower = (group.rank() & (1 << k)) == 0;
      from[k + 1] = keepLower ? from[k] : middle;
      to[k + 1] = keepLower ? middle : to[k];
      ByteBuffer given = keepLower ? elements(buffer, middle, to[k], es) : elements(buffer, from[k], middle, es);
      int divisor = k == steps - 1 && op == ReduceOp.MEAN ? group.size() : 1;
      exchange(seq, k, k, given,
          new Ring.Receive(k, elements(buffer, from[k + 1], to[k + 1], es), new Ring.Reduction(type, op, divisor)));
    }
    for (int k = steps - 1; k >= 0; k--) {
      // this rank holds [from[k + 1], to[k + 1]) of [from[k], to[k]); its partner the rest
      boolean heldLower = from[k + 1] == from[k];
      ByteBuffer theirs = heldLower ? elements(buffer, to[k + 1], to[k], es) : elements(buffer, from[k], from[k + 1], es);
      int step = 2 * steps - 1 - k;
      exchange(seq, k, step, elements(buffer, from[k + 1], to[k + 1], es), Ring.Receive.copy(step, theirs));
    }
  }

  /** Sends {@code mine} to partner {@code k} (the rank at distance 2^k) as {@code step}, while receiving. */
  private void exchange(int seq, int k, int step, ByteBuffer mine, Ring.Receive receive) {
    Ring partner = partners.get(k);
    watchdog.waitingOn(partner);
    partner.transfer(seq, List.of(new Ring.Send(step, mine, -1)), List.of(receive), watchdog.current());
  }

  /** {@link Algorithm#RECURSIVE_DOUBLING}: step k exchanges with the rank at distance 2^k, over partner ring k. */
  private void recursiveDoubling(int seq, ByteBuffer buffer, DataType type, ReduceOp op) {
    int bytes = buffer.remaining();
    if (gathered.capacity() < bytes) {
      gathered = ByteBuffer.allocateDirect(bytes).order(ByteOrder.LITTLE_ENDIAN);
    }
    ByteBuffer theirs = slice(gathered, 0, bytes);
    int count = bytes / type.bytes();
    for (int step = 0; step < partners.size(); step++) {
      exchange(seq, step, step, buffer, Ring.Receive.copy(step, theirs));
      // lower rank's values first: both partners compute the same bits
      boolean lower = (group.rank() & (1 << step)) == 0;
      Reductions.combine(type, op, buffer, 0, lower ? buffer : theirs, 0, lower ? theirs : buffer, 0, count);
    }
    if (op == ReduceOp.MEAN) {
      Reductions.divide(type, buffer, 0, count, group.size());
    }
  }

  /** {@link Algorithm#GATHER}: the other ranks' buffers arrive in {@code gathered}, then all n are combined in rank order. */
  private void gatherReduce(int seq, ByteBuffer buffer, DataType type, ReduceOp op) {
    int n = group.size();
    int r = group.rank();
    int bytes = buffer.remaining();
    if (gathered.capacity() < (long) (n - 1) * bytes) {
      gathered = ByteBuffer.allocateDirect((n - 1) * bytes).order(ByteOrder.LITTLE_ENDIAN);
    }
    ByteBuffer[] blocks = new ByteBuffer[n];
    for (int i = 0; i < n; i++) {
      blocks[i] = i == r ? buffer : slice(gathered, (i < r ? i : i - 1) * bytes, bytes);
    }
    ringGather(seq, blocks, watchdog.current());
    // ((x0 op x1) op x2) ...: the running result stays in block 0 until this rank's own values are
    // combined, then in this rank's buffer
    int count = bytes / type.bytes();
    for (int i = 1; i < n; i++) {
      ByteBuffer acc = r == 0 || i - 1 >= r ? buffer : blocks[0];
      ByteBuffer out = i >= r ? buffer : blocks[0];
      Reductions.combine(type, op, out, out.position(), acc, acc.position(), blocks[i], blocks[i].position(), count);
    }
    if (op == ReduceOp.MEAN) {
      Reductions.divide(type, buffer, 0, count, n);
    }
  }

  /**
   * {@link Algorithm#RING}: step t sends chunk r - t and reduces chunk r - t - 1 into this rank's
   * buffer (n - 1 steps, the last of which finishes chunk r + 1), then passes the finished chunks
   * on (n - 1 steps). Every step sends what the step before received, as soon as it is reduced.
   */
  private void ringReduce(int seq, ByteBuffer buffer, DataType type, ReduceOp op) {
    int n = group.size();
    int r = group.rank();
    int count = buffer.remaining() / type.bytes();
    int chunk = (count + n - 1) / n;
    int es = type.bytes();
    int steps = 2 * (n - 1);
    List<Ring.Send> sends = new ArrayList<>(steps);
    List<Ring.Receive> receives = new ArrayList<>(steps);
    for (int t = 0; t < steps; t++) {
      int c = t < n - 1 ? r - t - 1 : r - (t - (n - 1));
      ByteBuffer received = slice(buffer, chunkOffset(c, chunk, count) * es, chunkLength(c, chunk, count) * es);
      if (t == 0) {
        sends.add(new Ring.Send(t, slice(buffer, chunkOffset(r, chunk, count) * es, chunkLength(r, chunk, count) * es), -1));
      }
      if (t + 1 < steps) {
        sends.add(new Ring.Send(t + 1, received, t));
      }
      receives.add(t < n - 1
          ? new Ring.Receive(t, received, new Ring.Reduction(type, op, t == n - 2 && op == ReduceOp.MEAN ? n : 1))
          : Ring.Receive.copy(t, received));
    }
    ring.transfer(seq, sends, receives, watchdog.current());
  }

  /**
   * Ring all-gather into {@code blocks} (one per rank, this rank's filled): step t sends block
   * r - t and receives block r - t - 1, which the next step passes on as it arrives.
   */
  void ringGather(int seq, ByteBuffer[] blocks, String what) {
    int n = group.size();
    int r = group.rank();
    List<Ring.Send> sends = new ArrayList<>(n - 1);
    List<Ring.Receive> receives = new ArrayList<>(n - 1);
    for (int t = 0; t < n - 1; t++) {
      sends.add(new Ring.Send(t, blocks[Math.floorMod(r - t, n)], t - 1));
      receives.add(Ring.Receive.copy(t, blocks[Math.floorMod(r - t - 1, n)]));
    }
    ring.transfer(seq, sends, receives, what);
  }

  /** Bytes {@code [at, at + len)} of {@code buffer}, little-endian. */
  static ByteBuffer slice(ByteBuffer buffer, int at, int len) {
    return buffer.duplicate().limit(at + len).position(at).order(ByteOrder.LITTLE_ENDIAN);
  }

  /** Elements {@code [from, to)} of {@code elementBytes} each. */
  private static ByteBuffer elements(ByteBuffer buffer, int from, int to, int elementBytes) {
    return slice(buffer, from * elementBytes, (to - from) * elementBytes);
  }

  /** Ring chunk {@code c} (any integer, taken mod n) of {@code count} elements split in chunks of {@code chunk}. */
  private int chunkOffset(int c, int chunk, int count) {
    return (int) Math.min(count, (long) Math.floorMod(c, group.size()) * chunk);
  }

  private int chunkLength(int c, int chunk, int count) {
    int start = chunkOffset(c, chunk, count);
    return (int) Math.min(count, (long) start + chunk) - start;
  }
}
