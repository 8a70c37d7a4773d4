package io.muster.bench;

import io.muster.cluster.ClusterSpec;
import io.muster.internal.Json;
import io.muster.cluster.TaskId;
import io.muster.cluster.TfConfig;
import io.muster.rpc.JobToken;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;

/**
 * {@code muster bench allreduce [--table] [--tls] N SIZE...}: N ranks in separate JVMs on 127.0.0.1,
 * float32 SUM all-reduce of each SIZE (bytes; {@code 4K}, {@code 1M} also accepted). Prints rank
 * 0's JSON line per size; with {@code --table}, also a readable table with algbw and busbw
 * (NCCL-tests: busbw = algbw x 2(n-1)/n) next to a raw-TCP baseline measured in the same run. With
 * {@code --tls}, the ranks run with TLS configured (a throwaway self-signed certificate), so the
 * ring's streams are TLS; the JSON lines say {@code "tls": true}. With {@code --first-steps}, each
 * SIZE on a fresh gang: its first 100 all-reduces, as a job's first steps meet them, against 100
 * once the JIT has settled; {@code --warm-up} runs each size once per warm-up it lists, one after
 * another ({@code none}, or a {@link LoopbackWarmUp} while the gang forms).
 */
final class AllReduceBench {
  private AllReduceBench() {}

  /** The benchmark as its arguments ask, checked first. */
  static Bench.Job parse(List<String> args) {
    boolean table = args.contains("--table");
    boolean tls = args.contains("--tls");
    boolean firstSteps = args.contains(AllReduceRank.FIRST_STEPS);
    List<String> rest = new ArrayList<>(args);
    List<String> warmUps = takeWarmUps(rest, firstSteps);
    rest.remove("--table");
    rest.remove("--tls");
    rest.remove(AllReduceRank.FIRST_STEPS);
    rest.stream().filter(a -> a.startsWith("--")).findFirst().ifPresent(a -> {
      throw new IllegalArgumentException("unknown argument '" + a + "'; options: --table, --tls, --first-steps, "
          + "--warm-up");
    });
    if (firstSteps && (table || tls)) {
      throw new IllegalArgumentException("--first-steps goes without --table and --tls: it measures a fresh gang's "
          + "first all-reduces, without the table's baseline or TLS");
    }
    if (rest.size() < 2) {
      throw new IllegalArgumentException("needs N (ranks) and at least one SIZE: muster bench allreduce [--table] "
          + "[--tls] [--first-steps [--warm-up LIST]] N SIZE...");
    }
    int n = Bench.positive(rest.get(0), "N (ranks) must be an integer in 1..64, was '" + rest.get(0) + "'");
    if (n > 64) {
      throw new IllegalArgumentException("N (ranks) must be an integer in 1..64, was '" + rest.get(0) + "'");
    }
    List<String> sizes = new ArrayList<>();
    for (String s : rest.subList(1, rest.size())) {
      long bytes;
      try {
        bytes = parseSize(s);
      } catch (NumberFormatException e) {
        bytes = -1;
      }
      if (bytes <= 0 || bytes % 4 != 0 || bytes > (1L << 30)) {
        throw new IllegalArgumentException("SIZE must be a positive multiple of 4 bytes up to 1G (such as 4096, 4K, "
            + "64M), was '" + s + "'");
      }
      sizes.add(String.valueOf(bytes));
    }
    if (firstSteps) {
      return () -> {
        for (String size : sizes) { // a fresh gang per size: each size's first steps are the JIT's first sight of it
          for (String warmUp : warmUps) {
            allReduce(n, List.of(AllReduceRank.FIRST_STEPS, size), Map.of(AllReduceRank.WARM_UP_ENV, warmUp));
          }
        }
      };
    }
    return () -> run(n, sizes, table, tls);
  }

  /** Takes {@code --warm-up LIST} out of {@code args}: the warm-ups it lists, {@code none} without it. */
  private static List<String> takeWarmUps(List<String> args, boolean firstSteps) {
    int at = args.indexOf("--warm-up");
    if (at < 0) {
      return List.of("none");
    }
    String value = at + 1 < args.size() ? args.remove(at + 1) : "";
    args.remove(at);
    List<String> warmUps = value.equals("both") ? List.of("none", "loopback") : List.of(value.split(","));
    if (!warmUps.stream().allMatch(w -> w.matches("none|loopback(:[0-9]+)?"))) {
      throw new IllegalArgumentException("--warm-up takes a comma list of none, loopback and loopback:OPS, or both "
          + "(none,loopback); was '" + value + "'");
    }
    if (!firstSteps) {
      throw new IllegalArgumentException(
          "--warm-up goes with --first-steps: it is about a fresh gang's first all-reduces");
    }
    return warmUps;
  }

  private static void run(int n, List<String> sizes, boolean table, boolean tls) throws Exception {
    List<Map<String, Object>> ring;
    if (tls) {
      try (ThrowawayCertificate certificate = ThrowawayCertificate.create()) {
        ring = allReduce(n, sizes, certificate.environment());
      }
    } else {
      ring = allReduce(n, sizes, Map.of());
    }
    if (!table) {
      return;
    }
    Map<Long, Map<String, Object>> tcp = new HashMap<>();
    for (Map<String, Object> line : tcpBaseline(sizes)) {
      tcp.put(((Number) line.get("bytes")).longValue(), line);
    }
    System.out.printf("%nfloat32 SUM all-reduce, %d ranks on 127.0.0.1%s (time: median over ops of the slowest rank)%n", n,
        tls ? ", TLS" : "");
    System.out.printf("%10s %12s %12s %12s %12s %16s %10s%n", "size", "time", "mean", "algbw GB/s", "busbw GB/s",
        "tcp GB/s/dir", "busbw/tcp");
    for (Map<String, Object> line : ring) {
      long bytes = ((Number) line.get("bytes")).longValue();
      double median = ((Number) line.get("median_s")).doubleValue();
      double algbw = bytes / median / 1e9;
      double busbw = algbw * 2 * (n - 1) / n;
      double tcpRate = ((Number) tcp.get(bytes).get("gbps_per_direction")).doubleValue();
      System.out.printf("%10s %12s %12s %12.3f %12.3f %16.3f %10.2f%n", human(bytes), time(median),
          time(((Number) line.get("mean_s")).doubleValue()), algbw, busbw, tcpRate, busbw / tcpRate);
    }
  }

  private static List<Map<String, Object>> allReduce(int n, List<String> sizes, Map<String, String> tlsEnvironment)
      throws Exception {
    ClusterSpec cluster = Children.localWorkers(n);
    List<Process> ranks = new ArrayList<>();
    String launched = String.valueOf(System.currentTimeMillis());
    List<Map<String, Object>> lines = new ArrayList<>();
    try {
      for (int i = 0; i < n; i++) {
        Map<String, String> env = new HashMap<>(tlsEnvironment);
        env.put("TF_CONFIG", TfConfig.of(cluster, new TaskId("worker", i)).toJson());
        env.put(JobToken.ENV, "bench-token");
        env.put(AllReduceRank.LAUNCHED_ENV, launched);
        ranks.add(Children.start(AllReduceRank.class, sizes, env));
      }
      BufferedReader out = new BufferedReader(new InputStreamReader(ranks.get(0).getInputStream(), StandardCharsets.UTF_8));
      for (String line = out.readLine(); line != null; line = out.readLine()) {
        System.out.println(line);
        System.out.flush();
        @SuppressWarnings("unchecked")
        Map<String, Object> parsed = (Map<String, Object>) Json.parse(line);
        lines.add(parsed);
      }
      for (Process rank : ranks) {
        if (!rank.waitFor(120, TimeUnit.SECONDS) || rank.exitValue() != 0) {
          throw new IllegalStateException("a benchmark rank failed; see its output above");
        }
      }
      return lines;
    } finally {
      ranks.forEach(Process::destroyForcibly);
    }
  }

  private static List<Map<String, Object>> tcpBaseline(List<String> sizes) throws Exception {
    Process server = Children.start(TcpBaseline.class, List.of("server"), Map.of());
    try {
      String port = new BufferedReader(new InputStreamReader(server.getInputStream(), StandardCharsets.UTF_8)).readLine();
      List<String> args = new ArrayList<>(List.of("client", port));
      args.addAll(sizes);
      Process client = Children.start(TcpBaseline.class, args, Map.of());
      List<Map<String, Object>> lines = new ArrayList<>();
      try (BufferedReader out = new BufferedReader(new InputStreamReader(client.getInputStream(), StandardCharsets.UTF_8))) {
        for (String line = out.readLine(); line != null; line = out.readLine()) {
          System.out.println(line);
          @SuppressWarnings("unchecked")
          Map<String, Object> parsed = (Map<String, Object>) Json.parse(line);
          lines.add(parsed);
        }
      }
      client.waitFor(60, TimeUnit.SECONDS);
      return lines;
    } finally {
      server.destroyForcibly();
    }
  }

  static long parseSize(String s) {
    String t = s.trim().toUpperCase();
    long unit = t.endsWith("K") ? 1L << 10 : t.endsWith("M") ? 1L << 20 : t.endsWith("G") ? 1L << 30 : 1;
    return Long.parseLong(unit == 1 ? t : t.substring(0, t.length() - 1)) * unit;
  }

  private static String human(long bytes) {
    return bytes >= 1 << 20 ? (bytes >> 20) + " MiB" : bytes >= 1 << 10 ? (bytes >> 10) + " KiB" : bytes + " B";
  }

  private static String time(double seconds) {
    return seconds >= 1e-3 ? String.format("%.3f ms", seconds * 1e3) : String.format("%.1f us", seconds * 1e6);
  }
}
