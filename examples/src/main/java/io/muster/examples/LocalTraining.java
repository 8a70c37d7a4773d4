package io.muster.examples;

import io.muster.cluster.ClusterSpec;
import io.muster.internal.Json;
import io.muster.cluster.TaskId;
import io.muster.cluster.TfConfig;
import io.muster.rpc.JobToken;
import io.muster.strategy.PreemptedException;
import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.net.ServerSocket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;

/**
 * Runs {@link SoftmaxRegression} as N local workers, each its own JVM with its own {@code TF_CONFIG}
 * (the way N hosts would run it), relays their output prefixed with the task, and checks that all
 * ended with the same weights: {@code ./muster example softmax [--workers 4] [training args]} ({@link Examples}).
 */
public final class LocalTraining {

  /** What one run produced: each worker's result line, in worker order. */
  public record Result(int exitCode, List<Map<String, Object>> workers) {}

  private LocalTraining() {}

  /**
   * The workers, the training arguments (checked as each worker will check them), and how long into
   * training to send the last worker SIGTERM, as a scheduler would before it takes the host
   * ({@code --preempt-after}, counted from the chief's first epoch line).
   */
  record Settings(int workers, List<String> trainingArgs, Optional<Duration> preemptAfter) {
    static Settings parse(String[] args) {
      Map<String, String> defaults = new java.util.HashMap<>(SoftmaxRegression.DEFAULTS);
      defaults.put("--workers", "4");
      defaults.put("--preempt-after", "");
      Map<String, String> options = Args.parse(args, defaults);
      int workers = Args.positiveInt(options, "--workers");
      if (workers > 16) {
        throw new IllegalArgumentException("--workers must be in 1..16, was " + workers);
      }
      Optional<Duration> preemptAfter = Optional.empty();
      if (!options.get("--preempt-after").isEmpty()) {
        preemptAfter = Optional.of(Duration.ofMillis(Math.round(1000 * Args.positiveFloat(options, "--preempt-after"))));
        if (options.get("--out").isEmpty()) {
          throw new IllegalArgumentException("--preempt-after needs --out: the workers save there when preempted");
        }
      }
      SoftmaxRegression.Settings.of(options);
      List<String> rest = new ArrayList<>();
      for (String name : new java.util.TreeSet<>(SoftmaxRegression.DEFAULTS.keySet())) {
        rest.add(name);
        rest.add(options.get(name));
      }
      return new Settings(workers, rest, preemptAfter);
    }
  }

  public static Result run(int workers, List<String> trainingArgs, PrintStream out) throws Exception {
    return run(workers, trainingArgs, Optional.empty(), out);
  }

  /**
   * Trains on {@code workers} local JVMs. With {@code preemptAfter}, the last worker gets SIGTERM
   * that long after the chief's first epoch line; every worker should then save after one agreed step and exit 42,
   * which this reports with the time from the signal to the last worker's "preempted:" line.
   */
  static Result run(int workers, List<String> trainingArgs, Optional<Duration> preemptAfter, PrintStream out)
      throws Exception {
    ClusterSpec cluster = cluster(workers);
    out.println("cluster: " + cluster);
    List<Process> processes = new ArrayList<>();
    List<CompletableFuture<Map<String, Object>>> results = new ArrayList<>();
    Preempted preempted = new Preempted(workers);
    ScheduledExecutorService signaller = Executors.newSingleThreadScheduledExecutor();
    try {
      processes.addAll(start(cluster, trainingArgs));
      for (int i = 0; i < workers; i++) {
        Process process = processes.get(i);
        String prefix = "[worker " + i + "] ";
        int index = i;
        results.add(CompletableFuture.supplyAsync(() -> relay(process, prefix, out, preempted.lines[index],
            index == 0 ? preempted.trainingStarted : null)));
      }
      preemptAfter.ifPresent(after -> preempted.trainingStarted.thenRun(() -> signaller.schedule(
          () -> preempted.signal(processes.get(workers - 1)), after.toMillis(), TimeUnit.MILLISECONDS)));
      int exit = 0;
      List<Map<String, Object>> lines = new ArrayList<>();
      for (int i = 0; i < workers; i++) {
        Map<String, Object> line = results.get(i).get(10, TimeUnit.MINUTES);
        Process p = processes.get(i);
        p.waitFor(1, TimeUnit.MINUTES);
        if (preempted.signalNanos != 0 && p.exitValue() == PreemptedException.EXIT_CODE) {
          exit = exit == 0 ? PreemptedException.EXIT_CODE : exit; // a worker's failure is not hidden by another's save
        } else if (p.exitValue() != 0 || line == null) {
          out.println("worker " + i + " failed with exit code " + p.exitValue());
          exit = 1;
        }
        lines.add(line);
      }
      if (exit == PreemptedException.EXIT_CODE) {
        out.println(preempted.describe(workers - 1));
      } else if (exit == 0) {
        long distinct = lines.stream().map(l -> l.get("weights_sha256")).distinct().count();
        if (distinct != 1) {
          out.println("the workers ended with different weights: " + lines);
          exit = 1;
        } else {
          out.printf("%d workers, held-out accuracy %.4f, identical final weights on every worker (sha256 %s)%n",
              workers, ((Number) lines.get(0).get("accuracy")).doubleValue(), lines.get(0).get("weights_sha256"));
        }
      }
      return new Result(exit, lines);
    } finally {
      signaller.shutdownNow();
      processes.forEach(Process::destroyForcibly);
    }
  }

  /** When the SIGTERM went out, and when each worker said it had saved (its "preempted:" line). */
  private static final class Preempted {
    final PreemptedLine[] lines;
    /** Completed at the chief's first epoch line: every worker has its signal handler by then. */
    final CompletableFuture<Void> trainingStarted = new CompletableFuture<>();
    volatile long signalNanos;

    Preempted(int workers) {
      lines = new PreemptedLine[workers];
      for (int i = 0; i < workers; i++) {
        lines[i] = new PreemptedLine();
      }
    }

    void signal(Process worker) {
      signalNanos = System.nanoTime();
      worker.toHandle().destroy(); // SIGTERM; Process.destroy would also close the output being relayed
    }

    /** {@code worker 3 got SIGTERM; every worker saved after step 46 of epoch 6, 255 ms after it; ...}. */
    String describe(int signalled) {
      long last = 0;
      java.util.Set<String> saves = new java.util.TreeSet<>();
      for (PreemptedLine line : lines) {
        if (line.text == null) {
          return "worker " + signalled + " got SIGTERM and the workers exited 42, but not every one said where it saved";
        }
        saves.add(line.text);
        last = Math.max(last, line.nanos);
      }
      if (saves.size() != 1) {
        return "worker " + signalled + " got SIGTERM, and the workers saved at different steps: " + saves;
      }
      return "worker " + signalled + " got SIGTERM; every worker " + saves.iterator().next().replace("; run again", ", "
          + (last - signalNanos) / 1_000_000 + " ms after it; run the same command again without --preempt-after");
    }
  }

  /** A worker's "preempted:" line without its prefix, and when it came. */
  private static final class PreemptedLine {
    volatile String text;
    volatile long nanos;
  }

  /** A cluster of {@code workers} workers on this machine's free ports. */
  static ClusterSpec cluster(int workers) throws IOException {
    return ClusterSpec.of(Map.of("worker", freeAddresses(workers)));
  }

  /**
   * {@code n} distinct free ports on 127.0.0.1. Local runs only: the tasks are separate JVMs that
   * need their addresses before they start, so a port is free when chosen, not reserved. Every
   * socket stays open until all are chosen, or the system could hand out one port twice.
   */
  static List<String> freeAddresses(int n) throws IOException {
    List<ServerSocket> held = new ArrayList<>();
    try {
      List<String> addresses = new ArrayList<>();
      for (int i = 0; i < n; i++) {
        ServerSocket free = new ServerSocket(0);
        held.add(free);
        addresses.add("127.0.0.1:" + free.getLocalPort());
      }
      return addresses;
    } finally {
      for (ServerSocket socket : held) {
        socket.close();
      }
    }
  }

  /**
   * Starts a {@link SoftmaxRegression} JVM for each worker of {@code cluster}, with its own
   * {@code TF_CONFIG} and one fresh job token, its stderr merged into its stdout; the caller ends them.
   */
  static List<Process> start(ClusterSpec cluster, List<String> trainingArgs) throws IOException {
    String token = JobToken.random().value();
    List<Process> processes = new ArrayList<>();
    try {
      for (int i = 0; i < cluster.numTasks("worker"); i++) {
        List<String> command = new ArrayList<>(List.of(Path.of(System.getProperty("java.home"), "bin", "java")
            .toString(), "-Xmx256m", "-cp", System.getProperty("java.class.path"), SoftmaxRegression.class.getName()));
        command.addAll(trainingArgs);
        ProcessBuilder builder = new ProcessBuilder(command).redirectErrorStream(true);
        builder.environment().put(TfConfig.ENV, TfConfig.of(cluster, new TaskId("worker", i)).toJson());
        builder.environment().put(JobToken.ENV, token);
        processes.add(builder.start());
      }
      return processes;
    } catch (IOException | RuntimeException e) {
      processes.forEach(Process::destroyForcibly);
      throw e;
    }
  }

  private static final java.util.regex.Pattern EPOCH_LINE = java.util.regex.Pattern.compile("epoch \\d+: loss");

  /**
   * Copies a worker's output with its prefix; returns its JSON result line, or null. Notes its
   * "preempted:" line in {@code preempted}, and completes {@code firstEpoch} (when given) at its first epoch line.
   */
  @SuppressWarnings("unchecked")
  private static Map<String, Object> relay(Process process, String prefix, PrintStream out, PreemptedLine preempted,
      CompletableFuture<Void> firstEpoch) {
    Map<String, Object> result = null;
    try (BufferedReader in = new BufferedReader(new InputStreamReader(process.getInputStream(), StandardCharsets.UTF_8))) {
      for (String line = in.readLine(); line != null; line = in.readLine()) {
        synchronized (out) {
          out.println(prefix + line);
        }
        if (line.startsWith("{\"task\"")) {
          result = (Map<String, Object>) Json.parse(line);
        } else if (firstEpoch != null && EPOCH_LINE.matcher(line).find()) {
          firstEpoch.complete(null);
        } else if (line.startsWith("preempted: ")) {
          preempted.nanos = System.nanoTime();
          preempted.text = line.substring("preempted: ".length());
        }
      }
    } catch (IOException e) {
      synchronized (out) {
        out.println(prefix + "output lost: " + e.getMessage());
      }
    }
    return result;
  }
}
