package io.muster.examples;

import io.muster.cluster.TaskId;
import io.muster.coordination.CoordinationOptions;
import io.muster.coordinator.ClusterCoordinator;
import io.muster.coordinator.Functions;
import io.muster.coordinator.PerWorkerValues;
import io.muster.coordinator.RemoteValue;
import io.muster.coordinator.Value;
import io.muster.ps.Optimizer;
import io.muster.ps.ParameterServers;
import io.muster.ps.Variable;
import io.muster.strategy.ParameterServerStrategy;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;

/**
 * The parameter-server examples, each a small story told by the chief's output: TensorFlow's
 * classic experiments with shared variables between processes, on Muster. Every task runs this
 * main with its own {@code TF_CONFIG} ({@link LocalPsJob} starts them); the chief coordinates, the
 * workers and ps tasks serve.
 */
public final class PsExamples {

  /** The examples: name → {workers, ps} and what it shows. */
  static final Map<String, String> DESCRIPTIONS = new java.util.LinkedHashMap<>();
  static {
    DESCRIPTIONS.put("share", "two tasks share one variable: the worker's update is what the chief reads");
    DESCRIPTIONS.put("placement", "variables placed on the ps task you choose, or round-robin");
    DESCRIPTIONS.put("increment", "two workers increment a shared variable while its ps prints it");
    DESCRIPTIONS.put("wait-for-chief", "workers wait (with a deadline) until the chief has initialized the variables");
    DESCRIPTIONS.put("late-task", "the job waits for a task that starts late, naming it; --missing: it never comes");
    DESCRIPTIONS.put("leave-and-return", "a worker is killed mid-run and comes back; nothing is lost");
    DESCRIPTIONS.put("train", "asynchronous SGD with a ClusterCoordinator (synthetic data, or --data digits.csv); "
        + "--kill-worker-at N kills worker 1 midway");
  }

  /** The training example's options and defaults. */
  static final Map<String, String> TRAIN_OPTIONS = Map.of("--steps", "600", "--kill-worker-at", "0",
      "--learning-rate", "0.5", "--seed", "7", "--batch", "32", "--data", "");

  static final CoordinationOptions COORDINATION = CoordinationOptions.DEFAULTS
      .withHeartbeatTimeout(Duration.ofSeconds(2)).withJoinTimeout(Duration.ofSeconds(20))
      .withProgressInterval(Duration.ofSeconds(3));

  private static final int FEATURES = 20;
  private static final int CLASSES = 5;
  private static final int ROWS = 6000;
  private static final double TRAIN_FRACTION = 0.8;

  /** The training example's data: the --data CSV, or synthetic blobs; the same on every task. */
  static SyntheticBlobs dataset(String data, long seed) {
    return data.isEmpty() ? SyntheticBlobs.generate(seed, ROWS, FEATURES, CLASSES)
        : CsvData.read(java.nio.file.Path.of(data), seed, TRAIN_FRACTION);
  }

  /** Refuses data too small to give each worker a row to train on and to hold one row out. */
  static void requireEnoughRows(SyntheticBlobs all, String data, int workers) {
    if (trainRows(all) >= workers && trainRows(all) < all.rows()) {
      return;
    }
    int needed = workers;
    while ((int) (needed * TRAIN_FRACTION) < workers || (int) (needed * TRAIN_FRACTION) == needed) {
      needed++;
    }
    throw new IllegalArgumentException((data.isEmpty() ? "the synthetic data" : "--data " + data) + " has "
        + all.rows() + " rows: " + trainRows(all) + " to train on and " + (all.rows() - trainRows(all))
        + " held out; " + workers + " workers need a row each to train on, and one row is held out: give at least "
        + needed + " rows");
  }

  private static int trainRows(SyntheticBlobs all) {
    return (int) (all.rows() * TRAIN_FRACTION);
  }

  private PsExamples() {}

  /** How many workers and ps tasks an example runs. */
  static int[] shape(String example) {
    return switch (example) {
      case "share", "wait-for-chief" -> new int[] {1, 1};
      case "placement" -> new int[] {1, 2};
      default -> new int[] {2, 1};
    };
  }

  static Functions functions() {
    return Functions.builder()
        .function("add_to", (worker, args) -> {
          Variable v = worker.variable(args.get(0).string());
          v.assignAdd(new float[] {args.get(1).floatValue()});
          return Value.of(v.read()[0]);
        })
        .function("read", (worker, args) -> Value.of(worker.variable(args.get(0).string()).read()))
        .function("increment", (worker, args) -> {
          Thread.sleep(args.size() > 1 ? args.get(1).longValue() : 0);
          worker.variable(args.get(0).string()).assignAdd(new float[] {1f});
          return Value.of((long) worker.task().index());
        })
        .resource("batches", (worker, args) -> new Batches(dataset(args.get(3).string(), args.get(0).longValue()),
            (int) args.get(1).longValue(), worker.task().index(), (int) args.get(2).longValue()))
        .function("train_step", (worker, args) -> {
          Batches batches = worker.resource(args.get(0), Batches.class);
          SoftmaxModel model = new SoftmaxModel(batches.features(), batches.classes());
          Variable weights = worker.variable("weights");
          Variable bias = worker.variable("bias");
          System.arraycopy(weights.read(), 0, model.weights, 0, model.weights.length);
          System.arraycopy(bias.read(), 0, model.bias, 0, model.bias.length);
          float[] gradW = new float[model.weights.length];
          float[] gradB = new float[model.bias.length];
          float loss = batches.gradient(model, gradW, gradB);
          if (!Float.isFinite(loss)) {
            // join() raises it and cancels the steps still queued: a diverged model is not trained on
            throw new IllegalStateException(SoftmaxModel.diverged(loss, "step " + args.get(1).longValue()));
          }
          weights.applyGradient(gradW);
          bias.applyGradient(gradB);
          return Value.of(new float[] {loss, worker.task().index()});
        })
        .build();
  }

  /** A worker's own stream of training batches: its shard of the training rows, in a loop. */
  static final class Batches {
    private final SyntheticBlobs shard;
    private final int batch;
    private final int[] order;
    private int next;

    Batches(SyntheticBlobs all, int batch, int worker, int workers) {
      this.shard = all.range(0, trainRows(all)).shard(worker, workers);
      this.batch = Math.min(batch, shard.rows());
      this.order = java.util.stream.IntStream.range(0, shard.rows()).toArray();
    }

    int features() {
      return shard.features();
    }

    int classes() {
      return shard.classes();
    }

    synchronized float gradient(SoftmaxModel model, float[] gradW, float[] gradB) {
      if (next + batch > order.length) {
        next = 0;
      }
      float loss = model.gradient(shard, order, next, next + batch, gradW, gradB);
      next += batch;
      return loss;
    }
  }

  public static void main(String[] args) throws Exception {
    String example = args[0];
    List<String> options = Arrays.asList(args).subList(1, args.length);
    try (ParameterServerStrategy strategy = ParameterServerStrategy.builder().coordination(COORDINATION)
        .functions(functions()).join()) {
      TaskId task = strategy.taskId();
      if (strategy.isCoordinator()) {
        chief(example, options, strategy.coordinator());
      } else {
        beforeServing(example, task, strategy.variables());
        strategy.serve();
      }
    } catch (RuntimeException e) {
      System.out.println("failed: " + e.getMessage());
      System.exit(1);
    }
    System.exit(0);
  }

  /** What a worker or ps does before it serves. */
  private static void beforeServing(String example, TaskId task, ParameterServers variables) {
    if (example.equals("wait-for-chief") && task.job().equals("worker")) {
      System.out.println("waiting for the chief to initialize 'weights' (up to 60 s) ...");
      Variable weights = variables.variable("weights", Duration.ofSeconds(60));
      System.out.println("'weights' is ready: " + Arrays.toString(weights.read()));
    }
    if (example.equals("increment") && task.job().equals("ps")) {
      Thread printer = new Thread(() -> {
        Variable counter = variables.variable("counter", Duration.ofSeconds(60));
        float last = -1;
        while (true) {
          float now = counter.read()[0];
          if (now != last) {
            System.out.println("counter = " + (int) now);
            last = now;
          }
          try {
            Thread.sleep(250);
          } catch (InterruptedException e) {
            return;
          }
        }
      }, "printer");
      printer.setDaemon(true);
      printer.start();
    }
  }

  private static void chief(String example, List<String> options, ClusterCoordinator coordinator) throws Exception {
    ParameterServers variables = coordinator.variables();
    switch (example) {
      case "share" -> {
        Variable shared = variables.create("shared", new long[] {1}, Optimizer.NONE);
        shared.assign(new float[] {10f});
        System.out.println("created 'shared' on " + shared.shards().get(0).ps() + " and set it to 10");
        float seen = coordinator.schedule("add_to", Value.of("shared"), Value.of(5f)).fetch().floatValue();
        System.out.println("worker 0 added 5 and read " + seen);
        System.out.println("the chief reads 'shared' = " + shared.read()[0] + ": the worker's update, through "
            + shared.shards().get(0).ps());
      }
      case "placement" -> {
        List<Variable> created = new ArrayList<>();
        created.add(variables.createOn(new TaskId("ps", 1), "pinned_to_ps1", new long[] {2}, new float[] {1, 1},
            Optimizer.NONE));
        created.add(variables.createOn(new TaskId("ps", 0), "pinned_to_ps0", new long[] {2}, new float[] {2, 2},
            Optimizer.NONE));
        for (String name : List.of("a", "b", "c")) {
          created.add(variables.create(name, new long[] {2}, Optimizer.NONE));
        }
        for (Variable v : created) {
          System.out.println(v.name() + " lives on " + v.shards().get(0).ps());
        }
        Value fromWorker = coordinator.schedule("read", Value.of("pinned_to_ps1")).fetch();
        System.out.println("worker 0 reads pinned_to_ps1 = " + fromWorker);
      }
      case "increment" -> {
        variables.create("counter", new long[] {1}, Optimizer.NONE);
        int n = 200;
        for (int i = 0; i < n; i++) {
          coordinator.schedule("increment", Value.of("counter"), Value.of(10L));
        }
        coordinator.join();
        Thread.sleep(500); // let the ps print the last value
        System.out.println(n + " increments scheduled; counter = " + (int) variables.variable("counter").read()[0]);
      }
      case "wait-for-chief" -> {
        System.out.println("initializing 'weights' (this takes 3 s) ...");
        Thread.sleep(3000);
        variables.createOn(new TaskId("ps", 0), "weights", new long[] {3}, new float[] {0.1f, 0.2f, 0.3f},
            Optimizer.NONE);
        System.out.println("'weights' initialized");
        coordinator.schedule("read", Value.of("weights")).fetch();
      }
      case "late-task" -> {
        variables.create("counter", new long[] {1}, Optimizer.NONE);
        for (int i = 0; i < 20; i++) {
          coordinator.schedule("increment", Value.of("counter"));
        }
        coordinator.join();
        System.out.println("every task joined; 20 increments done: counter = "
            + (int) variables.variable("counter").read()[0]);
      }
      case "leave-and-return" -> leaveAndReturn(coordinator);
      case "train" -> train(options, coordinator);
      default -> throw new IllegalArgumentException("unknown example " + example);
    }
  }

  private static void leaveAndReturn(ClusterCoordinator coordinator) throws Exception {
    ParameterServers variables = coordinator.variables();
    variables.create("counter", new long[] {1}, Optimizer.NONE);
    int n = 100;
    List<RemoteValue> runs = new ArrayList<>();
    for (int i = 0; i < n; i++) {
      runs.add(coordinator.schedule("increment", Value.of("counter"), Value.of(30L)));
    }
    while (runs.stream().filter(r -> r.status() == RemoteValue.Status.READY).count() < 30) {
      Thread.sleep(20);
    }
    System.out.println("30 of " + n + " closures done; worker 1 is about to die");
    System.out.println(LocalPsJob.CONTROL + "kill worker 1");
    coordinator.join();
    Map<Long, Integer> perWorker = new TreeMap<>();
    for (RemoteValue r : runs) {
      perWorker.merge(r.fetch().longValue(), 1, Integer::sum);
    }
    System.out.println("all " + n + " closures completed without worker 1 (closures per worker: " + perWorker
        + "); counter = " + (int) variables.variable("counter").read()[0] + " (at least once: one more when a "
        + "closure was in flight on worker 1 as it died)");
    System.out.println(LocalPsJob.CONTROL + "restart worker 1");
    long deadline = System.nanoTime() + Duration.ofSeconds(60).toNanos();
    while (System.nanoTime() < deadline) {
      List<RemoteValue> more = new ArrayList<>();
      for (int i = 0; i < 10; i++) {
        more.add(coordinator.schedule("increment", Value.of("counter"), Value.of(30L)));
      }
      coordinator.join();
      if (more.stream().anyMatch(r -> r.fetch().longValue() == 1)) {
        System.out.println("worker 1 is back and runs closures again");
        return;
      }
    }
    throw new IllegalStateException("worker 1 did not come back within 60 s");
  }

  private static void train(List<String> options, ClusterCoordinator coordinator) throws Exception {
    Map<String, String> o = Args.parse(options.toArray(String[]::new), TRAIN_OPTIONS);
    int steps = Args.positiveInt(o, "--steps");
    int killAt = Integer.parseInt(o.get("--kill-worker-at"));
    float learningRate = Float.parseFloat(o.get("--learning-rate"));
    long seed = Long.parseLong(o.get("--seed"));
    int batch = Args.positiveInt(o, "--batch");
    String data = o.get("--data");
    SyntheticBlobs all = dataset(data, seed);
    requireEnoughRows(all, data, coordinator.workers().size());
    System.out.println((data.isEmpty() ? "synthetic data" : data) + ": " + all.rows() + " rows, " + all.features()
        + " features, " + all.classes() + " classes; " + trainRows(all) + " for training, the rest held out");
    ParameterServers variables = coordinator.variables();
    variables.create("weights", new long[] {all.features(), all.classes()}, null, Optimizer.sgd(learningRate), s -> 1);
    variables.create("bias", new long[] {all.classes()}, null, Optimizer.sgd(learningRate), s -> 1);
    PerWorkerValues batches = coordinator.createPerWorkerResource("batches", Value.of(seed), Value.of((long) batch),
        Value.of((long) coordinator.workers().size()), Value.of(data));
    List<RemoteValue> results = new ArrayList<>();
    for (int i = 0; i < steps; i++) {
      results.add(coordinator.schedule("train_step", batches, Value.of((long) i + 1)));
    }
    if (killAt > 0) {
      while (results.stream().filter(r -> r.status() == RemoteValue.Status.READY).count() < killAt) {
        Thread.sleep(10);
      }
      System.out.println(killAt + " steps done; worker 1 is about to die");
      System.out.println(LocalPsJob.CONTROL + "kill worker 1");
    }
    coordinator.join();
    Map<Integer, Integer> perWorker = new TreeMap<>();
    double firstLoss = 0;
    double lastLoss = 0;
    for (int i = 0; i < steps; i++) {
      float[] r = results.get(i).fetch().floats();
      perWorker.merge((int) r[1], 1, Integer::sum);
      if (i < 20) {
        firstLoss += r[0] / 20;
      }
      if (i >= steps - 20) {
        lastLoss += r[0] / 20;
      }
    }
    SoftmaxModel model = new SoftmaxModel(all.features(), all.classes());
    System.arraycopy(variables.variable("weights").read(), 0, model.weights, 0, model.weights.length);
    System.arraycopy(variables.variable("bias").read(), 0, model.bias, 0, model.bias.length);
    double accuracy = model.accuracy(all.range(trainRows(all), all.rows()));
    System.out.printf("%d steps (per worker: %s), loss %.4f → %.4f, held-out accuracy %.4f%n", steps, perWorker,
        firstLoss, lastLoss, accuracy);
  }
}
