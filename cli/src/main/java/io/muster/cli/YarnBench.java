package io.muster.cli;

import io.muster.internal.Json;
import io.muster.cluster.TaskType;
import io.muster.launch.GangSpec;
import io.muster.yarn.ApplicationMaster;
import io.muster.yarn.MusterClient;
import io.muster.yarn.YarnJob;
import io.muster.yarn.local.LocalYarn;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.EnumMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.atomic.AtomicLong;
import java.util.stream.Stream;
import org.apache.hadoop.yarn.api.records.ApplicationId;
import org.apache.hadoop.yarn.api.records.ApplicationReport;
import org.apache.hadoop.yarn.api.records.FinalApplicationStatus;

/**
 * {@code ./muster bench yarn [--containers 4,8] [--runs 3] [--executors both] [--restart both]}: on
 * {@link LocalYarn} (two NodeManagers in this JVM), the time from submission to every task's
 * command running, for gangs of N containers; the time from SIGKILL of one command to every
 * command of the next attempt running; and the ApplicationMaster's peak resident memory. Each with
 * the executors' class-data archive and without it (the path before it), and the restart also with
 * the failed attempt's containers kept and with a new gang of containers (the path before that),
 * alternating run by run. One JSON line per measurement, medians over the runs after a warm-up. The
 * clock is this machine's: the commands write {@code date +%s%3N}.
 */
public final class YarnBench {
  private YarnBench() {}

  static final String USAGE = "usage: muster bench yarn [--containers 4,8] [--runs 3] [--executors both] "
      + "[--restart both]   (--executors both: with the executors' class-data archive and without, run by run; or "
      + "archive, none. --restart both: the next attempt in the failed attempt's containers and in new ones; or keep, "
      + "new)";

  public static void main(String[] args) {
    System.exit(run(args, System.out, System.err));
  }

  /**
   * The command: {@code --help} prints the usage (0); a bad option is one line, exit 2, before the
   * cluster starts; a failed measurement is one line, exit 1.
   */
  static int run(String[] args, java.io.PrintStream out, java.io.PrintStream err) {
    if (Arrays.asList(args).contains("--help")) {
      out.println(USAGE);
      return 0;
    }
    List<Integer> containers;
    int runs;
    List<String> modes;
    List<String> restarts;
    try {
      Map<String, String> options = new LinkedHashMap<>(Map.of("--containers", "4,8", "--runs", "3",
          "--executors", "both", "--restart", "both"));
      for (int i = 0; i < args.length; i += 2) {
        if (!options.containsKey(args[i])) {
          throw new IllegalArgumentException("unknown argument '" + args[i]
              + "'; options: --containers, --runs, --executors, --restart");
        }
        if (i + 1 >= args.length) {
          throw new IllegalArgumentException(args[i] + " needs a value");
        }
        options.put(args[i], args[i + 1]);
      }
      String runsGiven = options.get("--runs");
      runs = positive(runsGiven, "--runs must be a positive integer, was '" + runsGiven + "'");
      String executors = options.get("--executors");
      modes = switch (executors) {
        case "both" -> List.of("none", "archive");
        case "archive", "none" -> List.of(executors);
        default -> throw new IllegalArgumentException("--executors must be both, archive or none, was '" + executors
            + "'");
      };
      String restart = options.get("--restart");
      restarts = switch (restart) {
        case "both" -> List.of("new", "keep");
        case "keep", "new" -> List.of(restart);
        default -> throw new IllegalArgumentException("--restart must be both, keep or new, was '" + restart + "'");
      };
      String csv = options.get("--containers");
      containers = new ArrayList<>();
      for (String n : csv.split(",", -1)) {
        containers.add(positive(n, "--containers must be positive integers separated by commas (such as 4,8), was '"
            + csv + "'"));
      }
    } catch (IllegalArgumentException e) {
      err.println("muster bench yarn: " + e.getMessage());
      return 2;
    }
    try {
      measure(containers, runs, modes, restarts);
      return 0;
    } catch (Exception e) {
      org.slf4j.LoggerFactory.getLogger(YarnBench.class).debug("muster bench yarn failed", e);
      err.println("muster bench yarn: " + java.util.Objects.requireNonNullElse(e.getMessage(), e.toString())
          + " (MUSTER_LOG_LEVEL=debug for the stack trace)");
      return 1;
    }
  }

  private static int positive(String value, String message) {
    try {
      int n = Integer.parseInt(value.strip());
      if (n > 0) {
        return n;
      }
    } catch (NumberFormatException e) {
      // the message says what is accepted
    }
    throw new IllegalArgumentException(message);
  }

  /**
   * Each measurement with the executors' class-data archive ({@code archive}) and without it
   * ({@code none}, the path before it); the restart also with the failed attempt's containers kept
   * ({@code keep}) and with new ones ({@code new}, the path before it); alternating run by run on the
   * same cluster.
   */
  private static void measure(List<Integer> sizes, int runs, List<String> modes, List<String> restartModes)
      throws Exception {
    try (LocalYarn local = LocalYarn.startTemporary()) {
      Map<String, MusterClient> clients = new LinkedHashMap<>();
      for (String mode : modes) {
        for (String restart : restartModes) {
          org.apache.hadoop.conf.Configuration conf = new org.apache.hadoop.conf.Configuration(local.configuration());
          conf.setBoolean(MusterClient.EXECUTOR_ARCHIVE, mode.equals("archive"));
          conf.setBoolean(MusterClient.KEEP_CONTAINERS, restart.equals("keep"));
          clients.put(mode + "/" + restart, new MusterClient(conf));
        }
      }
      try {
        Path dir = local.directory(); // the commands' outputs go with the cluster's files
        for (int containers : sizes) {
          Map<String, List<Double>> starts = new LinkedHashMap<>();
          Map<String, Long> peakRss = new LinkedHashMap<>();
          for (int run = -1; run < runs; run++) { // run -1 warms up (and makes the archive)
            for (String mode : modes) {
              Path out = Files.createDirectories(dir.resolve("start-" + containers + "-" + mode + run));
              AtomicLong rss = new AtomicLong();
              long submitted = System.currentTimeMillis();
              ApplicationReport report = runWatchingMaster(clients.get(mode + "/" + restartModes.get(0)), job(containers, 1,
                  "date +%s%3N > " + out + "/$MUSTER_TASK_INDEX; sleep 2"), rss);
              check(report);
              if (run >= 0) {
                starts.computeIfAbsent(mode, m -> new ArrayList<>()).add((double) (latest(out, containers) - submitted));
                peakRss.merge(mode, rss.get(), Math::max);
              }
            }
          }
          for (String mode : modes) {
            print(Map.of("bench", "yarn", "what", "submit_to_every_command_running", "executors", mode,
                "containers", containers, "median_ms", Math.round(median(starts.get(mode))),
                "runs_ms", starts.get(mode).stream().map(Math::round).toList()));
            print(Map.of("bench", "yarn", "what", "master_peak_rss", "executors", mode, "containers", containers,
                "mib", Math.round(peakRss.get(mode) / (1024.0 * 1024))));
          }
        }
        Map<String, List<Double>> restarts = new LinkedHashMap<>();
        for (int run = -1; run < runs; run++) {
          for (String mode : clients.keySet()) {
            Path out = Files.createDirectories(dir.resolve("restart-" + mode.replace('/', '-') + run));
            String command = "if [ \"$MUSTER_ATTEMPT\" = 0 ]; then echo $$ > " + out + "/pid-$MUSTER_TASK_INDEX; "
                + "exec sleep 600; fi; date +%s%3N > " + out + "/$MUSTER_TASK_INDEX; sleep 1";
            MusterClient client = clients.get(mode);
            ApplicationId id = client.submit(job(4, 2, command));
            long killed = killOneWhenAllRun(out, 4);
            ApplicationReport report = client.follow(id, Duration.ofMinutes(5), line -> { });
            check(report);
            if (run >= 0) {
              restarts.computeIfAbsent(mode, m -> new ArrayList<>()).add((double) (latest(out, 4) - killed));
            }
          }
        }
        for (String mode : clients.keySet()) {
          print(Map.of("bench", "yarn", "what", "kill_to_next_attempt_running", "executors", mode.split("/")[0],
              "restart", mode.split("/")[1], "containers", 4, "median_ms", Math.round(median(restarts.get(mode))),
              "runs_ms", restarts.get(mode).stream().map(Math::round).toList()));
        }
      } finally {
        for (MusterClient client : clients.values()) {
          client.close();
        }
      }
    }
  }

  private static YarnJob job(int workers, int attempts, String command) {
    Map<TaskType, YarnJob.Resources> resources = new EnumMap<>(TaskType.class);
    resources.put(TaskType.WORKER, new YarnJob.Resources(256, 1, 0));
    return YarnJob.builder().name("muster-bench").gang(GangSpec.workers(workers)).resources(resources)
        .command(command).maxAttempts(attempts).gangTimeout(Duration.ofMinutes(2))
        .classpath(Arrays.asList(System.getProperty("java.class.path").split(":"))).build();
  }

  private static ApplicationReport runWatchingMaster(MusterClient client, YarnJob job, AtomicLong peakRss)
      throws Exception {
    ApplicationId id = client.submit(job);
    Thread watch = new Thread(() -> {
      // the master's process is found once and then only its status is read: a scan of every
      // process every tenth of a second took a few per cent of a core from the start it measures
      Optional<ProcessHandle> master = Optional.empty();
      while (!Thread.currentThread().isInterrupted()) {
        master = master.filter(ProcessHandle::isAlive).or(YarnBench::findMaster);
        master.flatMap(YarnBench::rssBytes).ifPresent(r -> peakRss.accumulateAndGet(r, Math::max));
        try {
          Thread.sleep(100);
        } catch (InterruptedException e) {
          return;
        }
      }
    }, "muster-bench-master-rss");
    watch.setDaemon(true);
    watch.start();
    try {
      return client.follow(id, Duration.ofMinutes(5), line -> { });
    } finally {
      watch.interrupt();
    }
  }

  /** The running ApplicationMaster's process, if there is one. */
  private static Optional<ProcessHandle> findMaster() {
    return ProcessHandle.allProcesses()
        .filter(p -> p.info().command().map(c -> c.endsWith("/java")).orElse(false) && runsMaster(p.pid()))
        .findFirst();
  }

  /** A process's resident memory (VmRSS), unless it is gone. */
  private static Optional<Long> rssBytes(ProcessHandle process) {
    try {
      return Files.readAllLines(Path.of("/proc", Long.toString(process.pid()), "status")).stream()
          .filter(l -> l.startsWith("VmRSS:")).findFirst()
          .map(l -> Long.parseLong(l.replaceAll("\\D", "")) * 1024);
    } catch (IOException e) {
      return Optional.empty();
    }
  }

  /**
   * Whether the process's command line names the master's class: read from {@code /proc}, as the
   * JDK gives no arguments for a command line longer than a page (a class path's is).
   */
  private static boolean runsMaster(long pid) {
    try {
      return List.of(new String(Files.readAllBytes(Path.of("/proc", Long.toString(pid), "cmdline")),
          StandardCharsets.UTF_8).split("\0")).contains(ApplicationMaster.class.getName());
    } catch (IOException e) {
      return false; // gone meanwhile, or not ours to read
    }
  }

  /** Waits for the first attempt's commands to write their pids, kills worker 1's with SIGKILL; returns when. */
  private static long killOneWhenAllRun(Path out, int n) throws Exception {
    long deadline = System.currentTimeMillis() + 120_000;
    while (System.currentTimeMillis() < deadline) {
      try (Stream<Path> files = Files.list(out)) {
        if (files.filter(p -> p.getFileName().toString().startsWith("pid-")).count() == n) {
          break;
        }
      }
      Thread.sleep(50);
    }
    Thread.sleep(200); // the pid files are written; let the heartbeats settle
    long pid = Long.parseLong(Files.readString(out.resolve("pid-1")).trim());
    long killed = System.currentTimeMillis();
    ProcessHandle.of(pid).orElseThrow(() -> new IllegalStateException("worker 1's command is gone already"))
        .destroyForcibly();
    return killed;
  }

  private static long latest(Path out, int n) throws IOException {
    long latest = 0;
    for (int i = 0; i < n; i++) {
      latest = Math.max(latest, Long.parseLong(Files.readString(out.resolve(Integer.toString(i))).trim()));
    }
    return latest;
  }

  private static void check(ApplicationReport report) {
    if (report.getFinalApplicationStatus() != FinalApplicationStatus.SUCCEEDED) {
      throw new IllegalStateException("a bench job did not succeed: " + report.getFinalApplicationStatus() + " "
          + report.getDiagnostics());
    }
  }

  private static double median(List<Double> values) {
    List<Double> sorted = new ArrayList<>(values);
    sorted.sort(null);
    return sorted.get(sorted.size() / 2);
  }

  private static void print(Map<String, Object> line) {
    System.out.println(Json.write(new java.util.TreeMap<>(line)));
  }
}
