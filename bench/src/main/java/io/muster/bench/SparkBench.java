package io.muster.bench;

import io.muster.internal.CommandOptions;
import io.muster.collective.ReduceOp;
import io.muster.spark.BarrierTrainer;
import io.muster.spark.ExternalCommand;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.stream.IntStream;
import org.apache.spark.SparkConf;
import org.apache.spark.TaskContext;
import org.apache.spark.api.java.JavaRDD;
import org.apache.spark.api.java.JavaSparkContext;
import org.apache.spark.sql.SparkSession;

/**
 * {@code ./muster bench spark [--workers 4] [--runs 5] [--rendezvous both]}, in Spark {@code local[N]}, with
 * the tasks exchanging addresses through the driver ({@code driver}), through Spark's
 * {@code allGather} (the baseline), or both, one after the other in this JVM:
 * <ul>
 *   <li>gang start: job submitted → every task past the handshake (joined the coordination service
 *       with its ring up), in-JVM mode; and job submitted → every external command started;
 *   <li>kill and restart: one task killed with {@code SparkContext.killTaskAttempt} mid-training →
 *       every task of that gang ended (detected) → every task of the re-run gang past its handshake.
 * </ul>
 * Local mode runs every task in this JVM, so one {@code System.nanoTime} clock serves all.
 */
final class SparkBench {
  private SparkBench() {}

  /** Marks the tasks leave for the driver (same JVM in local mode). */
  static final Map<String, Long> MARKS = new ConcurrentHashMap<>();

  /** The benchmark as its options ask, checked first. */
  static Bench.Job parse(List<String> args) {
    Map<String, String> defaults = new java.util.LinkedHashMap<>();
    defaults.put("--workers", "4");
    defaults.put("--runs", "5");
    defaults.put("--rendezvous", "both");
    CommandOptions options = CommandOptions.parse(args, defaults, java.util.Set.of());
    int workers = options.positiveInt("--workers");
    int runs = options.positiveInt("--runs");
    String rendezvous = options.oneOf("--rendezvous", List.of("both", "driver", "allGather"));
    List<String> modes = rendezvous.equals("both") ? List.of("allGather", "driver") : List.of(rendezvous);
    return () -> {
      for (String mode : modes) { // the baseline first, in the same JVM
        run(workers, runs, mode);
      }
    };
  }

  private static void run(int workers, int runs, String rendezvous) throws Exception {
    SparkConf conf = new SparkConf().setMaster("local[" + workers + "]").setAppName("muster-bench-spark")
        .set("spark.ui.enabled", "false").set("spark.driver.host", "127.0.0.1")
        .set("spark.driver.bindAddress", "127.0.0.1").set(BarrierTrainer.RENDEZVOUS, rendezvous);
    try (JavaSparkContext jsc = new JavaSparkContext(conf)) {
      JavaRDD<Integer> data = jsc.parallelize(IntStream.range(0, workers).boxed().toList(), workers);
      gangStart(jsc, data, workers, 1, false); // warm-up: class loading, JIT
      List<Double> handshake = gangStart(jsc, data, workers, runs, true);
      List<Double> commands = commandStart(jsc, workers, runs);
      List<double[]> restarts = new ArrayList<>();
      for (int run = 0; run < runs; run++) {
        restarts.add(killAndRestart(jsc, data, workers, run));
      }
      System.out.printf("{\"bench\": \"spark\", \"rendezvous\": \"%s\", \"workers\": %d, \"runs\": %d, "
          + "\"gang_start_ms_median\": %.1f, \"command_start_ms_median\": %.1f, \"detect_ms_median\": %.1f, "
          + "\"restart_ms_median\": %.1f}%n", rendezvous, workers, runs, Bench.median(handshake), Bench.median(commands),
          Bench.median(restarts.stream().map(r -> r[0]).toList()),
          Bench.median(restarts.stream().map(r -> r[1]).toList()));
    }
  }

  private static List<Double> gangStart(JavaSparkContext jsc, JavaRDD<Integer> data, int workers, int runs,
      boolean print) {
    BarrierTrainer trainer = BarrierTrainer.builder().numWorkers(workers).build();
    List<Double> out = new ArrayList<>();
    for (int run = 0; run < runs; run++) {
      long submitted = System.nanoTime();
      Long lastJoined = trainer.fit(data, ctx -> {
        long[] joined = {System.nanoTime()}; // the strategy is built: joined, ring up
        ctx.strategy().collectives().allReduce(joined, ReduceOp.MAX);
        return joined[0];
      });
      long done = System.nanoTime();
      double ms = (lastJoined - submitted) / 1e6;
      out.add(ms);
      if (print) {
        System.out.printf("{\"bench\": \"spark-gang-start\", \"workers\": %d, \"run\": %d, \"handshake_ms\": %.1f, "
            + "\"fit_ms\": %.1f}%n", workers, run, ms, (done - submitted) / 1e6);
      }
    }
    return out;
  }

  /** Job submitted → the last command printed its first line (its start as the command itself saw it). */
  private static List<Double> commandStart(JavaSparkContext jsc, int workers, int runs) {
    List<Double> out = new ArrayList<>();
    SparkSession spark = SparkSession.builder().sparkContext(jsc.sc()).getOrCreate();
    for (int run = 0; run < runs; run++) {
      List<Long> started = new CopyOnWriteArrayList<>();
      long submittedMillis = System.currentTimeMillis();
      BarrierTrainer.builder().numWorkers(workers).commandLogs(line -> started.add(Long.parseLong(line.text())))
          .build().run(spark, ExternalCommand.of("date", "+%s%3N"));
      double ms = Collections.max(started) - submittedMillis;
      out.add(ms);
      System.out.printf("{\"bench\": \"spark-command-start\", \"workers\": %d, \"run\": %d, \"all_started_ms\": %.0f}%n",
          workers, run, ms);
    }
    return out;
  }

  /** @return {every task of the killed gang ended, every task of the re-run gang joined}, in ms after the kill */
  private static double[] killAndRestart(JavaSparkContext jsc, JavaRDD<Integer> data, int workers, int run)
      throws Exception {
    MARKS.clear();
    int victim = workers / 2;
    Thread killer = new Thread(() -> {
      long deadline = System.nanoTime() + 60_000_000_000L;
      while (MARKS.get("tid-" + victim) == null || MARKS.keySet().stream().filter(k -> k.startsWith("tid-")).count()
          < workers) {
        if (System.nanoTime() > deadline) {
          return;
        }
        Thread.onSpinWait();
      }
      sleep(300); // training is under way
      MARKS.put("killed", System.nanoTime());
      jsc.sc().killTaskAttempt(MARKS.get("tid-" + victim), true, "muster bench: killed worker " + victim);
    });
    killer.start();
    BarrierTrainer trainer = BarrierTrainer.builder().numWorkers(workers).maxAttempts(2).build();
    long lastJoined = trainer.fit(data, ctx -> {
      long joined = System.nanoTime();
      int index = ctx.task().index();
      if (ctx.attempt() == 0) {
        MARKS.put("tid-" + index, TaskContext.get().taskAttemptId());
        try {
          float[] x = new float[1024];
          long until = System.nanoTime() + 60_000_000_000L;
          while (System.nanoTime() < until) {
            ctx.strategy().collectives().allReduce(x, ReduceOp.SUM);
          }
          throw new IllegalStateException("worker " + index + " was never killed");
        } finally {
          MARKS.put("ended-" + index, System.nanoTime());
        }
      }
      long[] last = {joined};
      ctx.strategy().collectives().allReduce(last, ReduceOp.MAX);
      return last[0];
    });
    killer.join();
    long killed = MARKS.get("killed");
    long ended = IntStream.range(0, workers).mapToLong(i -> MARKS.get("ended-" + i)).max().orElseThrow();
    double[] result = {(ended - killed) / 1e6, (lastJoined - killed) / 1e6};
    System.out.printf("{\"bench\": \"spark-kill-restart\", \"workers\": %d, \"run\": %d, \"all_ended_ms\": %.1f, "
        + "\"all_rejoined_ms\": %.1f}%n", workers, run, result[0], result[1]);
    return result;
  }

  private static void sleep(long millis) {
    try {
      Thread.sleep(millis);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }
}
