package io.muster.collective;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.muster.testing.LocalCollectives;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Random;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.LockSupport;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;
import org.junit.jupiter.params.provider.ValueSource;

/** Every collective against a plain sequential computation, on 1 to 5 ranks over real sockets. */
class CollectivesTest {

  /** Sizes: empty, one element, fewer elements than ranks, a prime, one that is pipelined in pieces. */
  private static final int[] SIZES = {0, 1, 3, 7919, 300_001};

  private static long[] values(int rank, int count, long seed) {
    Random random = new Random(seed * 31 + rank);
    long[] v = new long[count];
    for (int i = 0; i < count; i++) {
      v[i] = random.nextInt(41) - 20; // small integers: every summation order is exact, even in float
    }
    return v;
  }

  private static long expected(ReduceOp op, long[][] all, int i) {
    long acc = all[0][i];
    for (int r = 1; r < all.length; r++) {
      long x = all[r][i];
      acc = switch (op) {
        case SUM, MEAN -> acc + x;
        case PRODUCT -> acc * x;
        case MIN -> Math.min(acc, x);
        case MAX -> Math.max(acc, x);
      };
    }
    return acc;
  }

  @ParameterizedTest(name = "{0} ranks")
  @ValueSource(ints = {1, 2, 3, 4, 5})
  void allReduceMatchesASequentialReductionForEveryTypeAndOp(int n) throws Exception {
    try (LocalCollectives group = new LocalCollectives(n, Duration.ofSeconds(10))) {
      for (int count : SIZES) {
        long[][] inputs = new long[n][];
        for (int r = 0; r < n; r++) {
          inputs[r] = values(r, count, count);
        }
        for (ReduceOp op : ReduceOp.values()) {
          // PRODUCT of 5 values up to 20 fits in a float's exact range only for small magnitudes
          long[][] in = op == ReduceOp.PRODUCT ? clamp(inputs, 4) : inputs;
          List<Object[]> results = group.onAll((c, r) -> {
            float[] f = toFloat(in[r]);
            double[] d = toDouble(in[r]);
            int[] i = toInt(in[r]);
            long[] l = in[r].clone();
            c.allReduce(f, op);
            c.allReduce(d, op);
            c.allReduce(i, op);
            c.allReduce(l, op);
            return new Object[] {f, d, i, l};
          });
          for (int r = 0; r < n; r++) {
            Object[] got = results.get(r);
            for (int k = 0; k < count; k++) {
              long exact = expected(op, in, k);
              String where = op + " n=" + n + " count=" + count + " rank " + r + " element " + k;
              double realMean = (double) exact / n;
              // delta 0: exact, except that -0.0 (a float product with a zero) equals the integer 0
              assertEquals(op == ReduceOp.MEAN ? (float) ((float) exact / n) : (float) exact, ((float[]) got[0])[k], 0f, where);
              assertEquals(op == ReduceOp.MEAN ? realMean : exact, ((double[]) got[1])[k], 0.0, where);
              assertEquals(op == ReduceOp.MEAN ? (int) (exact / n) : (int) exact, ((int[]) got[2])[k], where);
              assertEquals(op == ReduceOp.MEAN ? exact / n : exact, ((long[]) got[3])[k], where);
            }
          }
        }
      }
    }
  }

  @ParameterizedTest(name = "{0} ranks")
  @ValueSource(ints = {2, 3, 4, 5, 8})
  void everyRankEndsWithBitwiseIdenticalFloats(int n) throws Exception {
    try (LocalCollectives group = new LocalCollectives(n, Duration.ofSeconds(10))) {
      for (int count : new int[] {5, 100_003}) {
        List<float[]> results = group.onAll((c, r) -> {
          Random random = new Random(r);
          float[] f = new float[count];
          for (int i = 0; i < count; i++) {
            f[i] = (float) (random.nextGaussian() * Math.pow(10, random.nextInt(8) - 4));
          }
          c.allReduce(f, ReduceOp.MEAN);
          return f;
        });
        for (int r = 1; r < n; r++) {
          for (int i = 0; i < count; i++) {
            assertEquals(Float.floatToRawIntBits(results.get(0)[i]), Float.floatToRawIntBits(results.get(r)[i]),
                "rank " + r + " element " + i);
          }
        }
      }
    }
  }

  @ParameterizedTest(name = "{0} ranks")
  @ValueSource(ints = {1, 2, 3, 4})
  void allGatherConcatenatesDifferentLengthsInRankOrder(int n) throws Exception {
    try (LocalCollectives group = new LocalCollectives(n, Duration.ofSeconds(10))) {
      for (int scale : new int[] {1, 100_000}) {
        List<float[]> results = group.onAll((c, r) -> {
          float[] mine = new float[r * scale + (r == 1 ? 0 : 1)];
          Arrays.fill(mine, r + 0.5f);
          return c.allGather(mine);
        });
        float[] expected = new float[0];
        for (int r = 0; r < n; r++) {
          float[] part = new float[r * scale + (r == 1 ? 0 : 1)];
          Arrays.fill(part, r + 0.5f);
          float[] joined = Arrays.copyOf(expected, expected.length + part.length);
          System.arraycopy(part, 0, joined, expected.length, part.length);
          expected = joined;
        }
        for (float[] got : results) {
          assertArrayEquals(expected, got);
        }
      }
    }
  }

  @ParameterizedTest(name = "{0} ranks")
  @ValueSource(ints = {1, 2, 3, 5})
  void broadcastFromAnyRank(int n) throws Exception {
    try (LocalCollectives group = new LocalCollectives(n, Duration.ofSeconds(10))) {
      for (int root = 0; root < n; root++) {
        for (int count : new int[] {0, 3, 200_000}) {
          int from = root;
          List<double[]> results = group.onAll((c, r) -> {
            double[] d = new double[count];
            Arrays.fill(d, r == from ? 42.25 + from : -1);
            c.broadcast(d, from);
            return d;
          });
          double[] expected = new double[count];
          Arrays.fill(expected, 42.25 + root);
          for (double[] got : results) {
            assertArrayEquals(expected, got);
          }
        }
      }
    }
  }

  @ParameterizedTest(name = "{0} ranks")
  @ValueSource(ints = {2, 3})
  void directBuffersAreReducedInPlace(int n) throws Exception {
    try (LocalCollectives group = new LocalCollectives(n, Duration.ofSeconds(10))) {
      List<ByteBuffer> results = group.onAll((c, r) -> {
        ByteBuffer b = ByteBuffer.allocateDirect(4 * 1000).order(ByteOrder.LITTLE_ENDIAN);
        for (int i = 0; i < 1000; i++) {
          b.putInt(4 * i, i * (r + 1));
        }
        c.allReduce(b, DataType.INT32, ReduceOp.SUM);
        return b;
      });
      int factor = n * (n + 1) / 2;
      for (ByteBuffer b : results) {
        for (int i = 0; i < 1000; i++) {
          assertEquals(i * factor, b.getInt(4 * i));
        }
      }
    }
  }

  /**
   * Rank 0 reduces {@code count} floats, the others twice as many (on 4 ranks: both sizes by
   * recursive doubling, then both by halving and doubling).
   */
  @ParameterizedTest(name = "{0} ranks, {1} floats")
  @CsvSource({"2, 10", "3, 10", "4, 10", "4, 100000"})
  void mismatchedCallsFailEveryRankAndLaterCallsFailFast(int n, int count) throws Exception {
    try (LocalCollectives group = new LocalCollectives(n, Duration.ofSeconds(10))) {
      ExecutionException e = assertThrows(ExecutionException.class, () -> group.onAll((c, r) -> {
        c.allReduce(new float[r == 0 ? count : 2 * count], ReduceOp.SUM);
        return null;
      }));
      assertTrue(e.getCause().getMessage().contains("collectives out of step"), e.getCause().getMessage());
      for (int r = 0; r < n; r++) {
        int rank = r;
        // one rank alone: with no peer calling, only the group's recorded failure can end the call
        CollectiveException later = assertThrows(CollectiveException.class,
            () -> group.rank(rank).allReduce(new float[1], ReduceOp.SUM));
        assertTrue(later.getMessage().startsWith("Collective ops is aborted by: "), "rank " + r + ": " + later.getMessage());
        assertTrue(later.getMessage().contains("collectives out of step"), "rank " + r + ": " + later.getMessage());
      }
    }
  }

  @ParameterizedTest(name = "{0} ranks")
  @ValueSource(ints = {3})
  void meanOnIntegersTruncatesTowardZero(int n) throws Exception {
    try (LocalCollectives group = new LocalCollectives(n, Duration.ofSeconds(10))) {
      // sums: 4 -> 1 (4/3 = 1.33), -4 -> -1 (not -2), 5 -> 1, -5 -> -1
      List<int[]> results = group.onAll((c, r) -> {
        int[] v = r == 0 ? new int[] {4, -4, 5, -5} : new int[] {0, 0, 0, 0};
        c.allReduce(v, ReduceOp.MEAN);
        return v;
      });
      for (int[] got : results) {
        assertArrayEquals(new int[] {1, -1, 1, -1}, got);
      }
    }
  }

  /**
   * A rank busy for three times the timeout before it calls (saving, reading its data) holds the
   * others up but does not fail them: its keepalives, queued on the streams meanwhile, are read
   * past, and every rank gets the sum. A silent rank does fail them: {@link KilledRankTest}.
   */
  @ParameterizedTest(name = "{0} ranks")
  @ValueSource(ints = {3, 4})
  void aRankBusyForLongerThanTheTimeoutHoldsTheOthersUpWithoutFailingThem(int n) throws Exception {
    Duration timeout = Duration.ofSeconds(1);
    try (LocalCollectives group = new LocalCollectives(n, timeout)) {
      List<float[]> results = group.onAll((c, r) -> {
        float[] v = new float[1000];
        Arrays.fill(v, r + 1);
        if (r == 2) {
          sleep(timeout.multipliedBy(3));
        }
        c.allReduce(v, ReduceOp.SUM); // a small one (gather or recursive doubling), then a ring-sized one
        float[] large = new float[1 << 20];
        Arrays.fill(large, r + 1);
        if (r == 1) {
          sleep(timeout.multipliedBy(3));
        }
        c.allReduce(large, ReduceOp.SUM);
        return new float[] {v[0], v[999], large[0], large[large.length - 1]};
      });
      float sum = n * (n + 1) / 2f;
      for (float[] got : results) {
        assertArrayEquals(new float[] {sum, sum, sum, sum}, got);
      }
    }
  }

  private static void sleep(Duration d) {
    try {
      Thread.sleep(d.toMillis());
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new IllegalStateException(e);
    }
  }

  @ParameterizedTest(name = "{0} ranks")
  @ValueSource(ints = {2, 3, 4, 5, 8})
  void smallAllReducesGatherOrDoubleRecursivelyAndLargerOnesTakeTheRingOrHalveAndDouble(int n) throws Exception {
    try (LocalCollectives group = new LocalCollectives(n, Duration.ofSeconds(10))) {
      Collectives c = group.rank(0);
      if (n == 4 || n == 8) {
        assertEquals(Collectives.Algorithm.RECURSIVE_DOUBLING, c.algorithm(4));
        assertEquals(Collectives.Algorithm.RECURSIVE_DOUBLING, c.algorithm(16 << 10));
        assertEquals(Collectives.Algorithm.HALVING_DOUBLING, c.algorithm((16 << 10) + 4));
        assertEquals(Collectives.Algorithm.HALVING_DOUBLING, c.algorithm(64 << 20));
      } else {
        assertEquals(Collectives.Algorithm.GATHER, c.algorithm(4));
        assertEquals(Collectives.Algorithm.GATHER, c.algorithm(64 << 10));
        assertEquals(Collectives.Algorithm.RING, c.algorithm((64 << 10) + 4));
        assertEquals(Collectives.Algorithm.RING, c.algorithm(64 << 20));
      }
    }
  }

  /**
   * Recursive doubling, and halving and doubling, add the same pairs: ((x0 + x1) + (x2 + x3)) on 4
   * ranks, whatever the size. Values where the order shows: 1e8 + 1 is 1e8 in float, so this order
   * gives 0 where the gather's (((x0 + x1) + x2) + x3) would give 1, and halving at distance 2
   * first, ((x0 + x2) + (x1 + x3)), would give 2.
   */
  @ParameterizedTest(name = "{0} ranks, {1} floats")
  @CsvSource({"4, 1", "8, 1", "4, 100003", "8, 100003"})
  void partnerAlgorithmsAddPairsInRankOrder(int n, int count) throws Exception {
    float[] values = {1e8f, 1f, -1e8f, 1f, 3f, 1e8f, 1f, -1e8f};
    try (LocalCollectives group = new LocalCollectives(n, Duration.ofSeconds(10))) {
      List<float[]> results = group.onAll((c, r) -> {
        float[] mine = new float[count];
        Arrays.fill(mine, values[r]);
        c.allReduce(mine, ReduceOp.SUM);
        return mine;
      });
      // 4 ranks: (1e8 + 1) + (-1e8 + 1) = 1e8 - 1e8 = 0; 8 ranks: 0 + ((3 + 1e8) + (1 + -1e8)) = 1e8 - 1e8 = 0
      for (int r = 0; r < n; r++) {
        for (int i = 0; i < count; i++) {
          assertEquals(0f, results.get(r)[i], "rank " + r + " element " + i);
        }
      }
    }
  }

  /**
   * Rank 0's writes stop when the socket buffers are full, in the middle of a frame, because rank 1
   * has not called the all-reduce yet; an abort then completes that frame (with zeros) before its
   * ABORT frame, so rank 1, which starts reading meanwhile, fails with the abort's words and not as
   * if the abort's bytes were data.
   */
  @Test
  void anAbortWhileAFrameIsHalfWrittenReachesTheNextRankAsTheAbort() throws Exception {
    ExecutorService threads = Executors.newFixedThreadPool(2); // not the common pool: one thread on 2 cores
    // allocated first: allocating 64 MiB of direct memory can take longer than the abort's 200 ms
    ByteBuffer data0 = ByteBuffer.allocateDirect(64 << 20).order(ByteOrder.LITTLE_ENDIAN);
    ByteBuffer data1 = ByteBuffer.allocateDirect(64 << 20).order(ByteOrder.LITTLE_ENDIAN);
    try (LocalCollectives group = new LocalCollectives(2, Duration.ofSeconds(30))) {
      CompletableFuture<String> rank0 = CompletableFuture.supplyAsync(() -> failureOf(group.rank(0), data0), threads);
      LockSupport.parkNanos(TimeUnit.MILLISECONDS.toNanos(500)); // rank 0 is blocked in a write by now
      CompletableFuture<String> rank1 = CompletableFuture.supplyAsync(() -> {
        LockSupport.parkNanos(TimeUnit.MILLISECONDS.toNanos(50)); // within the abort's 200 ms
        return failureOf(group.rank(1), data1);
      }, threads);
      group.rank(0).abort("stopped by the test");

      assertTrue(rank1.get(10, TimeUnit.SECONDS).startsWith("Collective ops is aborted by: stopped by the test"),
          rank1.get());
      assertTrue(rank0.get(10, TimeUnit.SECONDS).startsWith("Collective ops is aborted by: stopped by the test"),
          rank0.get());
    } finally {
      threads.shutdownNow();
    }
  }

  /** What an all-reduce of {@code data} fails with. */
  private static String failureOf(Collectives rank, ByteBuffer data) {
    try {
      rank.allReduce(data, DataType.FLOAT32, ReduceOp.SUM);
      return "no failure";
    } catch (CollectiveException e) {
      return e.getMessage();
    }
  }

  /**
   * An abort from another thread while all-reduces run (16 MiB around the ring on 3 ranks, by
   * halving and doubling on 4; 4 KiB by recursive doubling) reaches every rank in its words, passed
   * on from rank to rank between (or after completing) the frames in flight, and between each
   * rank's ring and its pair streams.
   */
  @ParameterizedTest(name = "{0} ranks, {1} bytes")
  @CsvSource({"3, 16777216", "4, 16777216", "4, 4096", "8, 4096"})
  void anAbortInTheMiddleOfATransferReachesEveryRankInItsWords(int n, int bytes) throws Exception {
    try (LocalCollectives group = new LocalCollectives(n, Duration.ofSeconds(30))) {
      CompletableFuture<Void> abort = CompletableFuture.runAsync(() -> {
        LockSupport.parkNanos(TimeUnit.MILLISECONDS.toNanos(300));
        group.rank(2).abort("stopped by the test");
      });
      List<String> results = group.onAll((c, r) -> {
        ByteBuffer data = ByteBuffer.allocateDirect(bytes).order(ByteOrder.LITTLE_ENDIAN);
        try {
          for (int i = 0; i < (bytes < 1 << 20 ? 1_000_000 : 1000); i++) {
            c.allReduce(data, DataType.FLOAT32, ReduceOp.SUM);
          }
          return "no failure";
        } catch (CollectiveException e) {
          return e.getMessage();
        }
      });
      abort.get(10, TimeUnit.SECONDS);
      for (int r = 0; r < n; r++) {
        assertTrue(results.get(r).startsWith("Collective ops is aborted by: stopped by the test"),
            "rank " + r + ": " + results.get(r));
      }
    }
  }

  @Test
  void aRankWhoseNextRankHasGoneSaysItHasDiedOrLeftAndNotJustBrokenPipe() throws Exception {
    try (LocalCollectives group = new LocalCollectives(3, Duration.ofSeconds(30))) {
      group.rank(1).close(); // its sockets close, as when its process dies; rank 2 stays, silent
      // 16 MiB: more than the socket buffers take, so rank 0's writes to rank 1 meet the closed end
      CollectiveException e = assertThrows(CollectiveException.class,
          () -> group.rank(0).allReduce(new float[4 << 20], ReduceOp.SUM));
      assertTrue(e.getMessage().contains("sending to worker 1 failed: the connection was closed; worker 1 has died or "
          + "left the job ("), e.getMessage());
    }
  }

  @Test
  void aRankWhoseThreadIsInterruptedFailsSayingSoAndTellsTheOthers() throws Exception {
    try (LocalCollectives group = new LocalCollectives(2, Duration.ofSeconds(30))) {
      CompletableFuture<Thread> waiting = new CompletableFuture<>();
      CompletableFuture<String> interrupted = CompletableFuture.supplyAsync(() -> {
        waiting.complete(Thread.currentThread());
        try {
          group.rank(0).allReduce(new float[1000], ReduceOp.SUM); // rank 1 never calls
          return "no failure";
        } catch (CollectiveException e) {
          return e.getMessage();
        }
      });
      Thread rank0 = waiting.get(10, TimeUnit.SECONDS);
      LockSupport.parkNanos(TimeUnit.MILLISECONDS.toNanos(300)); // well past the polling, asleep in the read
      rank0.interrupt();
      String message = interrupted.get(10, TimeUnit.SECONDS);
      assertTrue(message.contains("this task's thread was interrupted (the task was killed or cancelled)"), message);
      // Rank 0's data went out before the interrupt, and its abort follows it on the stream: rank 1's
      // first call may still complete with it (the right sum), the next one cannot. The interrupt
      // closed rank 0's socket from rank 1 (as it closes any interruptible channel), so rank 1 learns
      // of it either from the abort or from that socket, naming rank 0.
      CollectiveException later = assertThrows(CollectiveException.class, () -> {
        group.rank(1).allReduce(new float[1000], ReduceOp.SUM);
        group.rank(1).allReduce(new float[1000], ReduceOp.SUM);
      });
      String words = later.getMessage();
      assertTrue(words.contains("this task's thread was interrupted") || words.contains("sending to worker 0 failed"),
          words);
    }
  }

  /**
   * A killed task's thread is interrupted mid-training: its abort still reaches the next rank, which
   * fails with its words at once, instead of finding a closed stream and waiting out the grace for
   * a word from the coordination service that the killed task could not send either (Spark's
   * kill-to-gang-ended went from ~15 ms to ~205 ms in most runs while it did).
   */
  @Test
  void anInterruptedRanksAbortStillReachesTheNextRankInItsOwnWords() throws Exception {
    ExecutorService threads = Executors.newFixedThreadPool(3);
    try (LocalCollectives group = new LocalCollectives(3, Duration.ofSeconds(30))) {
      CompletableFuture<Thread> rank1 = new CompletableFuture<>();
      CountDownLatch training = new CountDownLatch(3 * 20);
      List<CompletableFuture<String>> ends = new ArrayList<>();
      for (int r = 0; r < 3; r++) {
        int rank = r;
        ends.add(CompletableFuture.supplyAsync(() -> {
          if (rank == 1) {
            rank1.complete(Thread.currentThread());
          }
          float[] gradient = new float[1024]; // as Spark's benchmark trains
          try {
            while (true) {
              group.rank(rank).allReduce(gradient, ReduceOp.SUM);
              training.countDown();
            }
          } catch (CollectiveException e) {
            return e.getMessage();
          }
        }, threads));
      }
      assertTrue(training.await(30, TimeUnit.SECONDS), "the ranks train");
      rank1.get().interrupt();
      assertTrue(ends.get(1).get(10, TimeUnit.SECONDS).contains("this task's thread was interrupted"),
          ends.get(1).get());
      String next = ends.get(2).get(10, TimeUnit.SECONDS);
      assertTrue(next.contains("this task's thread was interrupted (the task was killed or cancelled)"), next);
      assertFalse(next.contains("has died or left the job"), next);
    } finally {
      threads.shutdownNow();
    }
  }

  private static long[][] clamp(long[][] inputs, int bound) {
    long[][] out = new long[inputs.length][];
    for (int r = 0; r < inputs.length; r++) {
      out[r] = Arrays.stream(inputs[r]).map(v -> Math.max(-bound, Math.min(bound, v))).toArray();
    }
    return out;
  }

  private static float[] toFloat(long[] v) {
    float[] f = new float[v.length];
    for (int i = 0; i < v.length; i++) {
      f[i] = v[i];
    }
    return f;
  }

  private static double[] toDouble(long[] v) {
    return Arrays.stream(v).asDoubleStream().toArray();
  }

  private static int[] toInt(long[] v) {
    return Arrays.stream(v).mapToInt(x -> (int) x).toArray();
  }
}
