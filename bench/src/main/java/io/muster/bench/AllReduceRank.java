package io.muster.bench;

import io.muster.internal.Json;
import io.muster.cluster.TfConfig;
import io.muster.collective.CollectiveGroup;
import io.muster.collective.Collectives;
import io.muster.collective.CommunicationOptions;
import io.muster.collective.DataType;
import io.muster.collective.ReduceOp;
import io.muster.coordination.CoordinationOptions;
import io.muster.internal.coordination.TaskRuntime;
import io.muster.rpc.Security;
import java.lang.management.CompilationMXBean;
import java.lang.management.ManagementFactory;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.time.Duration;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.Map;

/**
 * One rank of {@code muster bench allreduce}: float32 SUM all-reduce of each size. Rank 0 prints
 * one JSON line per size: each op's time is the maximum over ranks of that op's duration,
 * {@code median_s} the median over ops, {@code mean_s} rank 0's loop time divided by ops,
 * {@code algorithm} the all-reduce algorithm the size took ({@code gather}, {@code recursive_doubling},
 * {@code halving_doubling} or {@code ring}), {@code tls} whether the ring ran over TLS.
 */
public final class AllReduceRank {
  /** Longest warm-up of one size. */
  private static final double WARM_UP_LIMIT_S = 20;

  /** The argument that measures a fresh gang's first all-reduces against its steady state. */
  static final String FIRST_STEPS = "--first-steps";
  /** How many all-reduces make a training job's first steps, as issue 27 counts them. */
  private static final int STEPS = 100;
  /** With {@link #FIRST_STEPS}: {@code none}, or a {@link LoopbackWarmUp} while the gang forms. */
  static final String WARM_UP_ENV = "MUSTER_BENCH_WARM_UP";
  /** When the bench started the gang's JVMs, in milliseconds since the epoch. */
  static final String LAUNCHED_ENV = "MUSTER_BENCH_LAUNCHED_MS";

  private AllReduceRank() {}

  public static void main(String[] args) throws InterruptedException {
    TfConfig config = TfConfig.fromEnvironment(System.getenv());
    Security security = Security.fromEnvironment(System.getenv());
    CollectiveGroup gang = CollectiveGroup.of(config.cluster(), config.requireTask());
    String warmUpSpec = System.getenv().getOrDefault(WARM_UP_ENV, "none");
    LoopbackWarmUp warmUp = args[0].equals(FIRST_STEPS) && !warmUpSpec.equals("none")
        ? LoopbackWarmUp.start(warmUpSpec, gang.size(), Integer.parseInt(args[1]))
        : null;
    try (TaskRuntime runtime = TaskRuntime.builder(config, security)
        .options(CoordinationOptions.DEFAULTS.withJoinTimeout(Duration.ofMinutes(2))
            .withShutdownBarrierTimeout(Duration.ofMinutes(2))).start()) {
      runtime.join();
      // the data plane on this task's own host, as TF_CONFIG names it (127.0.0.1 for muster bench allreduce)
      String host = io.muster.cluster.HostPort.parse(config.cluster().taskAddress(runtime.task())).host();
      try (Collectives c = Collectives.create(gang, "bench",
          host, runtime.agent(), security, CommunicationOptions.DEFAULTS,
          Duration.ofSeconds(30))) {
        if (args[0].equals(FIRST_STEPS)) {
          long formed = System.currentTimeMillis();
          if (warmUp != null) {
            warmUp.close();
          }
          firstSteps(c, Integer.parseInt(args[1]), formed, warmUpSpec, warmUp == null ? 0 : warmUp.ops());
        } else {
          warmUp(c);
          for (String size : args) {
            run(c, Integer.parseInt(size), security.tls().isPresent());
          }
        }
      }
      runtime.agent().shutdown();
    }
  }

  /**
   * Small and medium all-reduces until the JIT has settled (see {@link #untilCompiled}), before
   * anything is measured, so that the first measured size does not share the cores with the
   * compilers of freshly started ranks.
   */
  private static void warmUp(Collectives c) {
    for (int bytes : new int[] {4 << 10, 256 << 10}) {
      untilCompiled(c, ByteBuffer.allocateDirect(bytes).order(ByteOrder.LITTLE_ENDIAN));
    }
  }

  /**
   * Runs all-reduces of {@code data} in windows of about a quarter second until two windows in a
   * row in which no rank's JIT compiled anything (or for {@link #WARM_UP_LIMIT_S}); returns the
   * last window's seconds per op. A fixed warm-up is not enough: with four JVMs on two cores, each
   * JVM's compilers were still compiling (and recompiling, as a new size takes branches the first
   * did not) the collectives' code seconds into a size, and successive 1 MiB sizes of one run on
   * 4 ranks measured 1.2 to 11.8 ms. Rank 0's op count is used by every rank, because every rank
   * must run exactly as many ops.
   */
  private static double untilCompiled(Collectives c, ByteBuffer data) {
    CompilationMXBean jit = ManagementFactory.getCompilationMXBean();
    long start = System.nanoTime();
    double perOp = timeOps(c, data, 3) / 3;
    long[] compiled = new long[1];
    int quiet = 0;
    do {
      int ops = agree(c, (long) (0.25 / perOp));
      long before = jit.getTotalCompilationTime();
      perOp = timeOps(c, data, ops) / ops;
      compiled[0] = jit.getTotalCompilationTime() - before;
      c.allReduce(compiled, ReduceOp.MAX);
      quiet = compiled[0] == 0 ? quiet + 1 : 0;
    } while (quiet < 2 && (System.nanoTime() - start) / 1e9 < WARM_UP_LIMIT_S);
    return perOp;
  }

  /**
   * A fresh gang's first {@link #STEPS} all-reduces of {@code bytes}, as a data-parallel job's
   * first steps run them (nothing warmed: the JIT starts on them), against as many once the JIT has
   * settled. Rank 0 prints one JSON line; every rank runs in lockstep, so its loop time is the gang's.
   * The line also says how long from the bench's launch of the gang's JVMs to the gang formed
   * ({@code formed}) and to the last of the first steps, which is what a warm-up must shorten.
   */
  private static void firstSteps(Collectives c, int bytes, long formed, String warmUpSpec, long warmUpOps) {
    ByteBuffer data = ByteBuffer.allocateDirect(bytes).order(ByteOrder.LITTLE_ENDIAN);
    double first = timeOps(c, data, STEPS);
    long stepped = System.currentTimeMillis();
    long settling = System.nanoTime();
    untilCompiled(c, data);
    double settled = (System.nanoTime() - settling) / 1e9;
    double steady = timeOps(c, data, STEPS);
    if (c.rank() == 0) {
      Map<String, Object> line = new LinkedHashMap<>();
      line.put("method", "muster-ring");
      line.put("what", "first_steps");
      line.put("ranks", c.size());
      line.put("bytes", bytes);
      line.put("steps", STEPS);
      line.put("first_s", first);
      line.put("steady_s", steady);
      line.put("extra_s", first - steady);
      line.put("settling_s", settled);
      line.put("warm_up", warmUpSpec);
      line.put("warm_up_ops", warmUpOps);
      long launched = Long.parseLong(System.getenv(LAUNCHED_ENV));
      line.put("launch_to_gang_s", (formed - launched) / 1e3);
      line.put("launch_to_step_100_s", (stepped - launched) / 1e3);
      System.out.println(Json.write(line));
      System.out.flush();
    }
  }

  /** Seconds taken by {@code ops} all-reduces. */
  private static double timeOps(Collectives c, ByteBuffer data, int ops) {
    long start = System.nanoTime();
    for (int i = 0; i < ops; i++) {
      c.allReduce(data, DataType.FLOAT32, ReduceOp.SUM);
    }
    return (System.nanoTime() - start) / 1e9;
  }

  /** Rank 0's count, clamped to 1..100000, on every rank. */
  private static int agree(Collectives c, long rankZeroCount) {
    ByteBuffer count = ByteBuffer.allocateDirect(8).order(ByteOrder.LITTLE_ENDIAN)
        .putLong(0, Math.max(1, Math.min(100_000, rankZeroCount)));
    c.broadcast(count, 0);
    return (int) count.getLong(0);
  }

  private static void run(Collectives c, int bytes, boolean tls) {
    int n = c.size();
    ByteBuffer data = ByteBuffer.allocateDirect(bytes).order(ByteOrder.LITTLE_ENDIAN);
    for (int i = 0; i < bytes; i += 4) {
      data.putFloat(i, 1f);
    }
    c.allReduce(data, DataType.FLOAT32, ReduceOp.SUM);
    for (int i = 0; i < bytes; i += 4) {
      if (data.getFloat(i) != n) {
        throw new IllegalStateException("all-reduce of ones gave " + data.getFloat(i) + " at byte " + i + ", not " + n);
      }
    }
    // The rank's start-up garbage (gRPC, class loading) would otherwise be collected in the middle
    // of some size's measurement: a pause, or a marking thread taking a core from the ranks.
    System.gc();
    // Warm-up, then about a second of ops, at least 5; rank 0 decides the count and broadcasts
    // it, because every rank must run exactly as many ops.
    double warmPerOp = untilCompiled(c, data);
    int total = agree(c, Math.max(5, (long) (1.0 / warmPerOp)));
    long[] times = new long[total];
    long loopStart = System.nanoTime();
    for (int i = 0; i < total; i++) {
      long t0 = System.nanoTime();
      c.allReduce(data, DataType.FLOAT32, ReduceOp.SUM);
      times[i] = System.nanoTime() - t0;
    }
    long loop = System.nanoTime() - loopStart;
    long[] all = c.allGather(times);
    if (c.rank() == 0) {
      long[] max = new long[total];
      for (int r = 0; r < n; r++) {
        for (int i = 0; i < total; i++) {
          max[i] = Math.max(max[i], all[r * total + i]);
        }
      }
      Arrays.sort(max);
      Map<String, Object> line = new LinkedHashMap<>();
      line.put("method", "muster-ring");
      line.put("ranks", n);
      line.put("bytes", bytes);
      line.put("median_s", max[total / 2] / 1e9);
      line.put("mean_s", loop / 1e9 / total);
      line.put("ops", total);
      line.put("algorithm", c.algorithm(bytes).name().toLowerCase(java.util.Locale.ROOT));
      line.put("tls", tls);
      System.out.println(Json.write(line));
      System.out.flush();
    }
  }
}
