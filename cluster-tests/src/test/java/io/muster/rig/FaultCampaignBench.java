package io.muster.rig;

import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Random;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Test;

/**
 * A randomized fault campaign, a benchmark rather than a test (it runs only with
 * {@code -Dmuster.rig.bench=true}; {@code -Dmuster.rig.trials=N}, 30 by default, and
 * {@code -Dmuster.rig.seed=S} to replay one): trials of Muster's own runtime, the softmax workers
 * with one JVM per emulated host and a plain {@code TF_CONFIG}, on 3 or 4 hosts, each with one
 * fault on a random host at a random moment of training: its link cut silently, its task killed
 * (SIGKILL), frozen (SIGSTOP, resumed {@link #FROZEN} later) or its link limited to 10 Mbit/s. It
 * counts hangs (a task not out {@link #OUT} after the fault, or after a frozen task's resume), wrong
 * exit codes (1 on every task after a cut, a kill or a freeze, the killed one's SIGKILL aside; 0 on
 * a slow link, with the same weights on every host), processes left on a host once its task has
 * ended, and the time from the fault to every task out. The workers checkpoint every epoch
 * ({@code --out}, a directory every host sees): after each trial {@code muster checkpoint verify}
 * must pass on the chief's checkpoints, the latest must be no older than the last epoch the chief
 * reported (a lost checkpoint otherwise), and after a fault that failed the run, the run started
 * again on every host (healed) must resume from the backup at that epoch or later and finish with
 * the same weights everywhere. The table goes to stdout and to
 * {@code ${java.io.tmpdir}/rig-campaign/campaign.md}.
 */
class FaultCampaignBench {
  private static final String TOKEN = "0123456789abcdef0123456789abcdef";
  private static final Duration OUT = Duration.ofSeconds(60);
  private static final Duration FROZEN = Duration.ofSeconds(20);
  private static final Pattern WEIGHTS = Pattern.compile("\"weights_sha256\"\\s*:\\s*\"([0-9a-f]{64})\"");
  private static final Pattern EPOCH_DONE = Pattern.compile("epoch (\\d+): loss");
  private static final Pattern VERIFIED = Pattern.compile("^ckpt-(\\d+): .*every CRC32C matches");
  private static final Pattern RESUMED = Pattern.compile("resumed from the backup: (\\d+) epochs done");

  enum Fault { CUT, KILL, FREEZE, SLOW }

  /**
   * One trial's outcome; {@code outMs} is the time from the fault to the last task out, -1 for a
   * hang; {@code checkpoints} says what the checks of the saved state found, a problem first.
   */
  private record Trial(int number, Fault fault, int hosts, int victim, long delayMs, long outMs, boolean hang,
      boolean wrongExit, List<String> orphans, String exits, Checkpoints checkpoints) {}

  /** The saved state after a trial: each problem, and what was seen. */
  private record Checkpoints(boolean lost, boolean unreadable, boolean notResumed, String seen) {
    boolean ok() {
      return !lost && !unreadable && !notResumed;
    }
  }

  @Test
  void randomFaultsOnTheSoftmaxWorkersAcrossHosts() throws Exception {
    assumeTrue(Boolean.getBoolean("muster.rig.bench"),
        "a benchmark: mvn -B -ntp -pl cluster-tests test -Dtest=FaultCampaignBench -Dmuster.rig.bench=true");
    assumeTrue(EmulatedHosts.unavailable().isEmpty(), () -> "skipped: " + EmulatedHosts.unavailable().orElseThrow());
    int trials = Integer.getInteger("muster.rig.trials", 30);
    long seed = Long.getLong("muster.rig.seed", System.currentTimeMillis());
    Random random = new Random(seed);
    List<Trial> done = new ArrayList<>();
    Path dir = Path.of(System.getProperty("java.io.tmpdir"), "rig-campaign");
    try (EmulatedHosts rig = EmulatedHosts.create(dir, 4)) {
      for (int t = 1; t <= trials; t++) {
        Fault fault = Fault.values()[random.nextInt(Fault.values().length)];
        int hosts = 3 + random.nextInt(2);
        int victim = 1 + random.nextInt(hosts);
        long delay = random.nextInt(3000);
        Trial trial = trial(rig, t, fault, hosts, victim, delay);
        System.out.println(trial);
        done.add(trial);
      }
    }
    List<String> table = new ArrayList<>(List.of("fault campaign: " + trials + " trials (seed " + seed + "), the softmax "
        + "workers on 3 or 4 emulated hosts, one fault each on a random host 0-3 s after epoch 2; heartbeat timeout "
        + "10 s", "", "| fault | trials | hangs | wrong exit codes | orphan processes | fault → every task out (s): "
        + "min / median / max | lost checkpoints | unreadable checkpoints | runs not resumed |",
        "|---|---|---|---|---|---|---|---|---|"));
    for (Fault fault : Fault.values()) {
      List<Trial> of = done.stream().filter(d -> d.fault() == fault).toList();
      List<Long> out = of.stream().filter(d -> !d.hang()).map(Trial::outMs).sorted().toList();
      table.add(String.format(Locale.ROOT, "| %s | %d | %d | %d | %d | %s | %d | %d | %d |", describe(fault), of.size(),
          of.stream().filter(Trial::hang).count(), of.stream().filter(Trial::wrongExit).count(),
          of.stream().mapToInt(d -> d.orphans().size()).sum(), fault == Fault.SLOW ? "— (it trains to the end)"
              : out.isEmpty() ? "—" : String.format(Locale.ROOT,
              "%.1f / %.1f / %.1f", out.get(0) / 1e3, out.get(out.size() / 2) / 1e3, out.get(out.size() - 1) / 1e3),
          of.stream().filter(d -> d.checkpoints().lost()).count(),
          of.stream().filter(d -> d.checkpoints().unreadable()).count(),
          of.stream().filter(d -> d.checkpoints().notResumed()).count()));
    }
    table.add("");
    done.forEach(d -> table.add("- " + d));
    Files.writeString(dir.resolve("campaign.md"), String.join("\n", table) + "\n");
    System.out.println(String.join("\n", table));
    assertTrue(done.stream().noneMatch(d -> d.hang() || d.wrongExit() || !d.orphans().isEmpty()
        || !d.checkpoints().ok()),
        "every trial ended as it should: " + dir.resolve("campaign.md"));
  }

  private static String describe(Fault fault) {
    return switch (fault) {
      case CUT -> "link cut silently";
      case KILL -> "task killed (SIGKILL)";
      case FREEZE -> "task frozen (SIGSTOP, resumed after " + FROZEN.toSeconds() + " s)";
      case SLOW -> "link at 10 Mbit/s (training goes on)";
    };
  }

  private static Trial trial(EmulatedHosts rig, int number, Fault fault, int hosts, int victim, long delay)
      throws Exception {
    Path out = rig.dir().resolve("trial-" + number);
    List<HostProcess> tasks = startWorkers(rig, "campaign-" + number, hosts, fault == Fault.SLOW ? 40 : 100_000, out);
    Host host = rig.host(victim);
    long[] outAt = new long[hosts];
    Arrays.fill(outAt, -1);
    long faultAt;
    try {
      tasks.get(0).awaitLine(Pattern.compile("epoch 2: loss"), Duration.ofMinutes(3), "training under way");
      Thread.sleep(delay);
      faultAt = System.nanoTime();
      HostProcess target = tasks.get(victim - 1);
      switch (fault) {
        case CUT -> host.cutLink();
        case KILL -> signal(target, "KILL");
        case FREEZE -> signal(target, "STOP");
        case SLOW -> host.limitRate("10mbit");
      }
      long deadline = faultAt + OUT.toNanos() + (fault == Fault.SLOW ? Duration.ofMinutes(2).toNanos() : 0);
      boolean resumed = fault != Fault.FREEZE;
      while (Arrays.stream(outAt).anyMatch(x -> x < 0) && System.nanoTime() < deadline) {
        if (!resumed && System.nanoTime() - faultAt > FROZEN.toNanos()) {
          signal(target, "CONT");
          resumed = true;
          deadline = System.nanoTime() + OUT.toNanos();
        }
        for (int i = 0; i < hosts; i++) {
          if (outAt[i] < 0 && !tasks.get(i).isAlive()) {
            outAt[i] = System.nanoTime();
          }
        }
        Thread.sleep(20);
      }
    } finally {
      if (fault == Fault.CUT) {
        host.healLink();
      } else if (fault == Fault.SLOW) {
        host.unlimitRate();
      }
    }
    boolean hang = Arrays.stream(outAt).anyMatch(x -> x < 0);
    List<Integer> exits = new ArrayList<>();
    List<String> weights = new ArrayList<>();
    for (HostProcess task : tasks) {
      exits.add(task.isAlive() ? null : task.waitFor(Duration.ofSeconds(1)));
      Matcher m = WEIGHTS.matcher(String.join("\n", task.stdout()));
      weights.add(m.find() ? m.group(1) : null);
      task.close();
    }
    boolean wrongExit = false;
    for (int i = 0; i < hosts; i++) {
      Integer expected = switch (fault) {
        case SLOW -> 0;
        case KILL -> i == victim - 1 ? 137 : 1;
        default -> 1;
      };
      wrongExit |= exits.get(i) != null && !exits.get(i).equals(expected);
    }
    if (fault == Fault.SLOW) {
      wrongExit |= weights.stream().distinct().count() != 1 || weights.get(0) == null;
    }
    List<String> orphans = orphans(rig, hosts);
    // a frozen task is out once resumed and gone; the others are timed from the fault
    long last = hang ? -1 : (Arrays.stream(fault == Fault.FREEZE ? without(outAt, victim - 1) : outAt).max()
        .orElseThrow() - faultAt) / 1_000_000;
    int reported = output(tasks.get(0)).stream().map(EPOCH_DONE::matcher).filter(Matcher::find)
        .mapToInt(m -> Integer.parseInt(m.group(1))).max().orElse(0);
    Checkpoints checkpoints = hang ? new Checkpoints(false, false, false, "not checked after a hang")
        : checkpoints(rig, number, hosts, out, reported, fault != Fault.SLOW);
    orphans.addAll(orphans(rig, hosts));
    return new Trial(number, fault, hosts, victim, delay, last, hang, wrongExit, orphans, exits.toString(),
        checkpoints);
  }

  /** The softmax workers, one per host from host1, checkpointing every epoch to {@code out}. */
  private static List<HostProcess> startWorkers(EmulatedHosts rig, String name, int hosts, int epochs, Path out) {
    List<String> command = new ArrayList<>(List.of(Installed.java(), "-Xmx256m", "-XX:+UseSerialGC", "-cp",
        Installed.joined(RuntimeAcrossHostsTest.examplesClasspath()), "io.muster.examples.SoftmaxRegression",
        "--epochs", String.valueOf(epochs), "--out", out.toString()));
    List<HostProcess> tasks = new ArrayList<>();
    for (int i = 0; i < hosts; i++) {
      tasks.add(rig.host(i + 1).start(name + "-task" + i, command, Map.of("TF_CONFIG",
          RuntimeAcrossHostsTest.tfConfig(i, hosts), "MUSTER_JOB_TOKEN", TOKEN)));
    }
    return tasks;
  }

  /**
   * The chief's checkpoints after a trial whose chief reported epoch {@code reported} done: the
   * latest verifies and is no older; where the run failed ({@code resume}), the run started again
   * resumes at that epoch or later and ends well, with the same weights on every host.
   */
  private static Checkpoints checkpoints(EmulatedHosts rig, int number, int hosts, Path out, int reported,
      boolean resume) throws Exception {
    int latest;
    try (HostProcess verify = rig.host(1).start("campaign-" + number + "-verify", verify(out.resolve("ckpt")),
        Map.of())) {
      int exit = verify.waitFor(Duration.ofMinutes(1));
      Matcher m = verify.stdout().stream().map(VERIFIED::matcher).filter(Matcher::find).findFirst().orElse(null);
      if (exit != 0 || m == null) {
        return new Checkpoints(false, true, false, "verify exited " + exit + ": " + verify.tail().replace('\n', ' '));
      }
      latest = Integer.parseInt(m.group(1));
    }
    String seen = "ckpt-" + latest + " verified, epoch " + reported + " reported";
    if (latest < reported) {
      return new Checkpoints(true, false, false, seen);
    }
    if (!resume) {
      return new Checkpoints(false, false, false, seen);
    }
    List<HostProcess> again = startWorkers(rig, "campaign-" + number + "-again", hosts, latest + 2, out);
    List<Integer> exits = new ArrayList<>();
    List<String> weights = new ArrayList<>();
    try {
      for (HostProcess task : again) {
        exits.add(task.waitFor(OUT));
        Matcher w = WEIGHTS.matcher(String.join("\n", task.stdout()));
        weights.add(w.find() ? w.group(1) : null);
      }
    } catch (IllegalStateException stillRunning) {
      return new Checkpoints(false, false, true, seen + "; the run started again did not end: "
          + stillRunning.getMessage().lines().findFirst().orElse(""));
    } finally {
      again.forEach(HostProcess::close);
    }
    Matcher resumed = RESUMED.matcher(String.join("\n", output(again.get(0))));
    int resumedAt = resumed.find() ? Integer.parseInt(resumed.group(1)) : -1;
    seen += "; started again: resumed with " + resumedAt + " epochs done, exits " + exits;
    boolean ended = exits.stream().allMatch(e -> e == 0) && weights.get(0) != null
        && weights.stream().distinct().count() == 1;
    return new Checkpoints(false, false, resumedAt < reported || !ended, seen);
  }

  /** What a task wrote, stdout then stderr (where its log goes). */
  private static List<String> output(HostProcess task) {
    List<String> lines = new ArrayList<>(task.stdout());
    lines.addAll(task.stderr());
    return lines;
  }

  /** {@code muster checkpoint verify DIR}. */
  private static List<String> verify(Path dir) {
    return List.of(Installed.java(), "-Xmx256m", "-cp", Installed.joined(Installed.cli()), "io.muster.cli.Muster",
        "checkpoint", "verify", dir.toString());
  }

  /** The processes left on host1..host{@code hosts}, each host's then killed. */
  private static List<String> orphans(EmulatedHosts rig, int hosts) {
    List<String> orphans = new ArrayList<>();
    for (int i = 0; i < hosts; i++) {
      List<Long> left = rig.host(i + 1).processes();
      if (!left.isEmpty()) {
        orphans.add("host" + (i + 1) + ": " + left);
        rig.host(i + 1).killAll();
      }
    }
    return orphans;
  }

  private static long[] without(long[] values, int index) {
    long[] out = new long[values.length - 1];
    for (int i = 0, j = 0; i < values.length; i++) {
      if (i != index) {
        out[j++] = values[i];
      }
    }
    return out;
  }

  private static void signal(HostProcess process, String signal) {
    EmulatedHosts.exec(List.of("kill", "-" + signal, String.valueOf(process.pid())));
  }
}
