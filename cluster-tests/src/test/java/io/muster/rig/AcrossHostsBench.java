package io.muster.rig;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Test;

/**
 * Across-host figures, a benchmark rather than a test (it runs only with
 * {@code -Dmuster.rig.bench=true}): gang start on Spark standalone and YARN, and float32 SUM all-reduce of 16 and 64 MiB between 2 and 4
 * emulated hosts whose links are limited to 1 Gbit/s each way ({@code tc … tbf}), Muster's ring
 * (the {@code muster bench allreduce} rank, one JVM per host) against the link's rate, which no
 * all-reduce can beat (bus bandwidth as NCCL-tests defines it), and against PyTorch's Gloo on the same
 * hosts in the same run (one process per host; skipped, saying so, where Debian's python3-torch is
 * not installed). The table goes to stdout and to {@code target/rig-bench/allreduce.md}.
 */
class AcrossHostsBench {
  private static final String TOKEN = "0123456789abcdef0123456789abcdef";
  private static final List<Long> SIZES = List.of(16L << 20, 64L << 20);
  private static final String RATE = "1gbit";
  private static final double LINK_BYTES_PER_S = 1e9 / 8;
  private static final Duration RUN = Duration.ofMinutes(10);
  private static final Pattern LINE = Pattern.compile("\"bytes\"\\s*:\\s*(\\d+).*\"median_s\"\\s*:\\s*([0-9.eE-]+)");
  private static final String PYTHON = "/usr/bin/python3";

  @Test
  void allReduceAcrossHostsOnOneGigabitLinks() throws Exception {
    assumeTrue(Boolean.getBoolean("muster.rig.bench"),
        "a benchmark: mvn -B -ntp -pl cluster-tests test -Dtest=AcrossHostsBench -Dmuster.rig.bench=true");
    assumeTrue(EmulatedHosts.unavailable().isEmpty(), () -> "skipped: " + EmulatedHosts.unavailable().orElseThrow());
    boolean gloo = hasTorch();
    List<String> table = new ArrayList<>(List.of(
        "float32 SUM all-reduce, one rank per emulated host, every link limited to " + RATE + " each way (tbf); "
            + "time: median over ops of the slowest rank; busbw = size/time × 2(n-1)/n",
        "",
        "| ranks | size | Muster time | Muster busbw MB/s | busbw / link rate | Gloo time | Gloo busbw MB/s | "
            + "Muster time / Gloo time |",
        "|---|---|---|---|---|---|---|---|"));
    try (EmulatedHosts rig = EmulatedHosts.create(Path.of(System.getProperty("java.io.tmpdir"), "rig-bench"), 4)) {
      rig.hosts().forEach(h -> h.limitRate(RATE));
      for (int n : List.of(2, 4)) {
        Map<Long, Double> muster = muster(rig, n);
        Map<Long, Double> peer = gloo ? gloo(rig, n) : Map.of();
        for (long size : SIZES) {
          double busbw = size / muster.get(size) * 2 * (n - 1) / n / 1e6;
          Double g = peer.get(size);
          table.add(String.format(Locale.ROOT, "| %d | %d MiB | %.3f s | %.1f | %.2f | %s | %s | %s |", n, size >> 20,
              muster.get(size), busbw, busbw * 1e6 / LINK_BYTES_PER_S, g == null ? "—" : String.format(Locale.ROOT,
                  "%.3f s", g), g == null ? "—" : String.format(Locale.ROOT, "%.1f", size / g * 2 * (n - 1) / n / 1e6),
              g == null ? "—" : String.format(Locale.ROOT, "%.2f", muster.get(size) / g)));
        }
      }
    }
    if (!gloo) {
      table.add("");
      table.add("Gloo: not measured, " + PYTHON + " has no torch (apt-get install python3-torch)");
    }
    Path out = Path.of(System.getProperty("java.io.tmpdir"), "rig-bench", "allreduce.md");
    Files.writeString(out, String.join("\n", table) + "\n");
    System.out.println(String.join("\n", table));
  }

  /**
   * Gang start across hosts, as a user sees it: from the launcher's start on host1 to the last of
   * three commands' first line ({@code date +%s%3N}; the hosts share the kernel's clock), on Spark
   * standalone ({@code spark-submit} of {@code spark-run}, a one-core Worker on each of host2..host4:
   * the application's start and its executors' included) and on YARN ({@code muster submit}, one
   * container per host on host2..host5).
   */
  @Test
  void gangStartAcrossHostsOnSparkAndYarn() throws Exception {
    assumeTrue(Boolean.getBoolean("muster.rig.bench"),
        "a benchmark: mvn -B -ntp -pl cluster-tests test -Dtest=AcrossHostsBench -Dmuster.rig.bench=true");
    assumeTrue(EmulatedHosts.unavailable().isEmpty(), () -> "skipped: " + EmulatedHosts.unavailable().orElseThrow());
    List<Double> spark = new ArrayList<>();
    List<Double> yarn = new ArrayList<>();
    try (EmulatedHosts rig = EmulatedHosts.create(Path.of(System.getProperty("java.io.tmpdir"), "rig-bench-start"), 5)) {
      Host client = rig.host(1);
      try (SparkStandalone cluster = SparkStandalone.start(rig, client, rig.hosts().subList(1, 4), 1)) {
        for (int run = 0; run < GANG_RUNS; run++) {
          List<String> args = List.of("--master", cluster.masterUrl(), "--deploy-mode", "client", "--executor-memory",
              "512m", "--total-executor-cores", "3", "--executor-cores", "1", "--conf",
              "spark.dynamicAllocation.enabled=false", "--conf", "spark.ui.enabled=false", "--jars",
              String.join(",", Installed.musterJars().stream().map(Path::toString).toList()), "--class",
              "io.muster.examples.SparkRun", Installed.examplesJar().toString(), "--workers", "3", "--", "date", "+%s%3N");
          long submitted = System.currentTimeMillis();
          try (HostProcess p = cluster.submit(client, "spark-start-" + run, null, args)) {
            assertEquals(0, p.waitFor(RUN), p.tail());
            spark.add(lastStart(p.stderr(), Pattern.compile("\\[worker \\d] (\\d{13})$"), submitted));
          }
        }
      }
      try (Hdfs hdfs = Hdfs.start(rig, client, rig.hosts().subList(1, 5));
          Yarn cluster = Yarn.start(rig, hdfs, client, rig.hosts().subList(1, 5))) {
        for (int run = 0; run < GANG_RUNS; run++) {
          long submitted = System.currentTimeMillis();
          try (HostProcess p = cluster.muster(client, "yarn-start-" + run, List.of("submit", "--worker-instances", "3",
              "--worker-memory", "1536m", "--command", "date +%s%3N"))) {
            assertEquals(0, p.waitFor(RUN), p.tail());
            Matcher app = Pattern.compile("application_\\d+_\\d+").matcher(String.join("\n", p.stdout()));
            assertTrue(app.find(), p.tail());
            List<String> lines = new ArrayList<>();
            for (Host host : rig.hosts()) {
              for (Path stdout : Yarn.containerStdouts(host)) {
                if (stdout.toString().contains(app.group() + "/")) {
                  lines.addAll(Files.readAllLines(stdout));
                }
              }
            }
            yarn.add(lastStart(lines, Pattern.compile("^(\\d{13})$"), submitted));
          }
        }
      }
    }
    List<String> table = List.of("gang start across hosts: launcher started on host1 → the last of 3 commands' first "
            + "line (date +%s%3N), " + GANG_RUNS + " runs", "",
        "| launcher | runs (s) | median (s) |", "|---|---|---|",
        row("spark-submit of spark-run, Spark standalone, a one-core Worker on host2..host4", spark),
        row("muster submit, YARN, one container on each of 3 of host2..host5", yarn));
    Path out = Path.of(System.getProperty("java.io.tmpdir"), "rig-bench-start", "gang-start.md");
    Files.writeString(out, String.join("\n", table) + "\n");
    System.out.println(String.join("\n", table));
  }

  private static final int GANG_RUNS = 3;

  /** Seconds from {@code submitted} to the latest of the three commands' printed start times. */
  private static double lastStart(List<String> lines, Pattern start, long submitted) {
    List<Long> starts = new ArrayList<>();
    for (String line : lines) {
      Matcher m = start.matcher(line.strip());
      if (m.find()) {
        starts.add(Long.parseLong(m.group(1)));
      }
    }
    assertEquals(3, starts.size(), "three commands started: " + lines);
    return (starts.stream().mapToLong(Long::longValue).max().orElseThrow() - submitted) / 1000.0;
  }

  private static String row(String what, List<Double> seconds) {
    List<Double> sorted = seconds.stream().sorted().toList();
    return "| " + what + " | " + String.join(", ", seconds.stream().map(x -> String.format(Locale.ROOT, "%.2f", x))
        .toList()) + " | " + String.format(Locale.ROOT, "%.2f", sorted.get(sorted.size() / 2)) + " |";
  }

  /** Muster's ring: the benchmark rank on hosts 1..n; rank 0's median per size. */
  private static Map<Long, Double> muster(EmulatedHosts rig, int n) throws Exception {
    List<String> workers = new ArrayList<>();
    for (int i = 1; i <= n; i++) {
      workers.add("\"host" + i + ":2222\"");
    }
    List<String> command = new ArrayList<>(List.of(Installed.java(), "-Xmx1g", "-XX:MaxDirectMemorySize=2g", "-cp",
        Installed.joined(Installed.bench()), "io.muster.bench.AllReduceRank"));
    SIZES.forEach(s -> command.add(String.valueOf(s)));
    List<HostProcess> ranks = new ArrayList<>();
    try {
      for (int i = 0; i < n; i++) {
        String tfConfig = "{\"cluster\": {\"worker\": [" + String.join(", ", workers) + "]}, \"task\": {\"type\": "
            + "\"worker\", \"index\": " + i + "}}";
        ranks.add(rig.host(i + 1).start("allreduce-" + n + "-rank" + i, command, Map.of("TF_CONFIG", tfConfig,
            "MUSTER_JOB_TOKEN", TOKEN)));
      }
      for (HostProcess rank : ranks) {
        assertEquals(0, rank.waitFor(RUN), rank.tail());
      }
      return medians(ranks.get(0).stdout(), "Muster, " + n + " ranks");
    } finally {
      ranks.forEach(HostProcess::close);
    }
  }

  /** Gloo: one process per host, meeting at host1. */
  private static Map<Long, Double> gloo(EmulatedHosts rig, int n) throws Exception {
    Path script = Installed.root().resolve("cluster-tests/src/test/resources/gloo_rank.py");
    List<HostProcess> ranks = new ArrayList<>();
    try {
      for (int i = 0; i < n; i++) {
        List<String> command = new ArrayList<>(List.of(PYTHON, script.toString(), "host1:29500", String.valueOf(i),
            String.valueOf(n)));
        SIZES.forEach(s -> command.add(String.valueOf(s)));
        ranks.add(rig.host(i + 1).start("gloo-" + n + "-rank" + i, command, Map.of("GLOO_SOCKET_IFNAME", "eth0",
            "OMP_NUM_THREADS", "1")));
      }
      for (HostProcess rank : ranks) {
        assertEquals(0, rank.waitFor(RUN), rank.tail());
      }
      return medians(ranks.get(0).stdout(), "Gloo, " + n + " ranks");
    } finally {
      ranks.forEach(HostProcess::close);
    }
  }

  private static Map<Long, Double> medians(List<String> lines, String what) {
    Map<Long, Double> out = new LinkedHashMap<>();
    for (String line : lines) {
      Matcher m = LINE.matcher(line);
      if (m.find()) {
        out.put(Long.parseLong(m.group(1)), Double.parseDouble(m.group(2)));
      }
    }
    assertTrue(out.keySet().containsAll(SIZES), what + ": a result for every size: " + lines);
    return out;
  }

  private static boolean hasTorch() throws Exception {
    if (!Files.isExecutable(Path.of(PYTHON))) {
      return false;
    }
    Process p = new ProcessBuilder(PYTHON, "-c", "import torch.distributed").redirectErrorStream(true).start();
    p.getInputStream().readAllBytes();
    return p.waitFor() == 0;
  }
}
