package io.muster.bench;

import io.muster.cluster.TaskId;
import io.muster.collective.CollectiveGroup;
import io.muster.collective.Collectives;
import io.muster.collective.CommunicationOptions;
import io.muster.collective.DataType;
import io.muster.collective.ReduceOp;
import io.muster.coordination.KeyValues;
import io.muster.rpc.JobToken;
import io.muster.rpc.Security;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CyclicBarrier;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;

/**
 * Issue 27's warm-up, as a benchmark's experiment (it is not in the runtime: on 2 cores it made a
 * gang's 100th step later, see docs/benchmarks.md): while a rank waits for its gang, a scratch
 * group of as many threads as the gang has ranks all-reduces a buffer of the job's size over
 * 127.0.0.1 inside the rank's JVM, so that the JIT has compiled the collectives' paths (framing,
 * progress loop, reduction) before the job's first steps take them. It stops at {@link #close}
 * (the gang has formed), after its number of all-reduces, or after {@link #LIMIT}.
 */
final class LoopbackWarmUp implements AutoCloseable {
  /** All-reduces between two looks at whether to stop. */
  static final int ROUND = 10;
  private static final Duration LIMIT = Duration.ofSeconds(20);

  private final AtomicLong ops = new AtomicLong();
  private final AtomicReference<Exception> failure = new AtomicReference<>();
  private final List<Thread> ranks = new ArrayList<>();
  private volatile boolean stopAsked;
  private volatile boolean stopped;

  private LoopbackWarmUp() {}

  /**
   * {@code spec} is {@code loopback} (until the gang forms) or {@code loopback:OPS} (at most OPS
   * all-reduces, rounded up to a {@link #ROUND}).
   */
  static LoopbackWarmUp start(String spec, int ranks, int bytes) {
    long maxOps = spec.equals("loopback") ? Long.MAX_VALUE : Long.parseLong(spec.substring("loopback:".length()));
    LoopbackWarmUp warmUp = new LoopbackWarmUp();
    List<TaskId> members = new ArrayList<>();
    for (int r = 0; r < ranks; r++) {
      members.add(new TaskId("warm-up", r));
    }
    KeyValues addresses = new InMemoryKeyValues();
    long deadline = System.nanoTime() + LIMIT.toNanos();
    CyclicBarrier round = new CyclicBarrier(ranks,
        () -> warmUp.stopped = warmUp.stopAsked || warmUp.ops.get() >= maxOps || System.nanoTime() > deadline);
    Security security = Security.of(JobToken.of("loopback-warm-up"));
    for (int r = 0; r < ranks; r++) {
      CollectiveGroup group = new CollectiveGroup(members, r);
      Thread rank = new Thread(() -> {
        try (Collectives c = Collectives.create(group, "warm-up", "127.0.0.1", addresses, security,
            CommunicationOptions.DEFAULTS, Duration.ofSeconds(10))) {
          ByteBuffer data = ByteBuffer.allocateDirect(bytes).order(ByteOrder.LITTLE_ENDIAN);
          for (await(round); !warmUp.stopped; await(round)) {
            for (int i = 0; i < ROUND; i++) {
              c.allReduce(data, DataType.FLOAT32, ReduceOp.SUM);
            }
            if (group.rank() == 0) {
              warmUp.ops.addAndGet(ROUND);
            }
          }
        } catch (Exception e) {
          warmUp.failure.compareAndSet(null, e);
          round.reset(); // the other threads stop too
        }
      }, "loopback-warm-up-" + r);
      rank.setDaemon(true);
      warmUp.ranks.add(rank);
    }
    warmUp.ranks.forEach(Thread::start);
    return warmUp;
  }

  /** Waits for the scratch group's other threads, for at most {@link #LIMIT}. */
  private static void await(CyclicBarrier round) throws Exception {
    round.await(LIMIT.toMillis(), TimeUnit.MILLISECONDS);
  }

  /** All-reduces the warm-up ran. */
  long ops() {
    return ops.get();
  }

  /** Stops the warm-up after its current round; a warm-up that failed fails the measurement. */
  @Override
  public void close() throws InterruptedException {
    stopAsked = true;
    for (Thread rank : ranks) {
      rank.join(LIMIT.toMillis());
    }
    if (failure.get() != null) {
      throw new IllegalStateException("the loopback warm-up failed: " + failure.get(), failure.get());
    }
  }

  /** The key-value store through which the scratch group's ring setup exchanges its addresses. */
  private static final class InMemoryKeyValues implements KeyValues {
    private final Map<String, byte[]> values = new HashMap<>();

    @Override
    public synchronized void insert(String key, byte[] value, boolean allowOverwrite) {
      values.put(key, value);
      notifyAll();
    }

    @Override
    public synchronized byte[] get(String key, Duration timeout) {
      long deadline = System.nanoTime() + timeout.toNanos();
      try {
        while (!values.containsKey(key)) {
          long left = deadline - System.nanoTime();
          if (left <= 0) {
            throw new IllegalStateException("no ring address at '" + key + "' within " + timeout);
          }
          wait(Math.max(1, left / 1_000_000));
        }
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        throw new IllegalStateException("interrupted waiting for the ring address at '" + key + "'");
      }
      return values.get(key);
    }
  }
}
