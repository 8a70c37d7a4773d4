package io.muster.rig;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * Muster's own runtime across emulated hosts, without a launcher: each task is a JVM on its own
 * host with a {@code TF_CONFIG} naming the hosts by name (as a scheduler or a shell script would
 * give it) and the job's token, on the same port on every host.
 */
class RuntimeAcrossHostsTest {

  private static final Duration RUN = Duration.ofMinutes(3);
  private static final String TOKEN = "0123456789abcdef0123456789abcdef";
  private static EmulatedHosts rig;

  @BeforeAll
  static void startHosts() {
    assumeTrue(EmulatedHosts.unavailable().isEmpty(), () -> "skipped: " + EmulatedHosts.unavailable().orElseThrow());
    rig = EmulatedHosts.create(Path.of(System.getProperty("java.io.tmpdir"), "rig-runtime"), 4);
  }

  @AfterAll
  static void stopHosts() {
    if (rig != null) {
      rig.close();
    }
  }

  private static String tfConfig(int index) {
    return "{\"cluster\": {\"worker\": [\"host1:2222\", \"host2:2222\", \"host3:2222\"]}, "
        + "\"task\": {\"type\": \"worker\", \"index\": " + index + "}}";
  }

  private static List<HostProcess> onEachHost(String name, int hosts, List<String> command) {
    List<HostProcess> processes = new ArrayList<>();
    for (int i = 0; i < hosts; i++) {
      processes.add(rig.host(i + 1).start(name, command, Map.of("TF_CONFIG", tfConfig(i), "MUSTER_JOB_TOKEN", TOKEN)));
    }
    return processes;
  }

  private static List<String> java(List<Path> classpath, String main, String... args) {
    List<String> command = new ArrayList<>(List.of(Installed.java(), "-Xmx256m", "-XX:+UseSerialGC", "-cp",
        Installed.joined(classpath), main));
    command.addAll(List.of(args));
    return command;
  }

  @Test
  void theSoftmaxWorkersOnThreeHostsEndWithIdenticalWeights() {
    List<Path> classpath = new ArrayList<>(List.of(Installed.examplesJar()));
    classpath.addAll(Installed.musterJars());
    classpath.addAll(Installed.spark()); // Log4j, as ./muster example gives it
    List<HostProcess> workers = onEachHost("softmax", 3, java(classpath, "io.muster.examples.SoftmaxRegression",
        "--epochs", "2"));
    List<String> hashes = new ArrayList<>();
    try {
      for (HostProcess worker : workers) {
        assertEquals(0, worker.waitFor(RUN), worker.tail());
        Matcher m = Pattern.compile("\"weights_sha256\"\\s*:\\s*\"([0-9a-f]{64})\"").matcher(String.join("\n",
            worker.stdout()));
        assertTrue(m.find(), worker.tail());
        hashes.add(m.group(1));
      }
    } finally {
      workers.forEach(HostProcess::close);
    }
    assertEquals(1, hashes.stream().distinct().count(), "the same weights on every host: " + hashes);
  }

  @Test
  void aClusterCoordinatorJobTrainsThroughWorkersOnTwoHostsWithItsParameterServerOnAFourth() {
    String cluster = "\"cluster\": {\"chief\": [\"host1:2222\"], \"worker\": [\"host2:2222\", \"host3:2222\"], "
        + "\"ps\": [\"host4:2222\"]}";
    List<String> tasks = List.of("\"chief\", \"index\": 0", "\"worker\", \"index\": 0", "\"worker\", \"index\": 1",
        "\"ps\", \"index\": 0");
    List<Path> classpath = new ArrayList<>(List.of(Installed.examplesJar()));
    classpath.addAll(Installed.musterJars());
    classpath.addAll(Installed.spark()); // Log4j, as ./muster example gives it
    List<HostProcess> all = new ArrayList<>();
    try {
      for (int i = 0; i < 4; i++) {
        all.add(rig.host(i + 1).start("ps-train", java(classpath, "io.muster.examples.PsExamples", "train"),
            Map.of("TF_CONFIG", "{" + cluster + ", \"task\": {\"type\": " + tasks.get(i) + "}}", "MUSTER_JOB_TOKEN",
                TOKEN)));
      }
      // While the job runs, every task listens on its own host's address alone: not on every interface,
      // not on loopback, not on an address of another host.
      for (int i = 0; i < 4; i++) {
        Host host = rig.host(i + 1);
        List<String> listening = awaitListening(host, ":2222", all.get(i));
        assertEquals(List.of(host.address() + ":2222"), listening.stream().filter(a -> a.endsWith(":2222")).toList(),
            host + ": " + listening);
        assertTrue(listening.stream().allMatch(a -> a.startsWith(host.address() + ":")), host + ": " + listening);
      }
      HostProcess chief = all.get(0);
      assertEquals(0, chief.waitFor(RUN), chief.tail());
      // 600 steps (per worker: {0=507, 1=93}), loss 0.5226 → 0.2409, held-out accuracy 0.9200
      Matcher m = Pattern.compile("(\\d+) steps \\(per worker: \\{0=(\\d+), 1=(\\d+)}\\), loss \\S+ → \\S+, held-out "
          + "accuracy (\\d\\.\\d+)").matcher(String.join("\n", chief.stdout()));
      assertTrue(m.find(), chief.tail());
      assertEquals(Integer.parseInt(m.group(1)), Integer.parseInt(m.group(2)) + Integer.parseInt(m.group(3)), m.group());
      assertTrue(Integer.parseInt(m.group(2)) > 0 && Integer.parseInt(m.group(3)) > 0, "both workers trained: " + m.group());
      assertTrue(Double.parseDouble(m.group(4)) > 0.8, m.group());
    } finally {
      all.forEach(HostProcess::close);
    }
  }

  /** The host's listening addresses once one ends with {@code port}; fails if {@code task} exits first. */
  private static List<String> awaitListening(Host host, String port, HostProcess task) {
    long deadline = System.nanoTime() + RUN.toNanos();
    while (System.nanoTime() < deadline && task.isAlive()) {
      List<String> listening = host.listeningAddresses();
      if (listening.stream().anyMatch(a -> a.endsWith(port))) {
        return listening;
      }
      try {
        Thread.sleep(100);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        throw new IllegalStateException(e);
      }
    }
    throw new IllegalStateException(host + ": nothing listened on " + port + "\n" + task.tail());
  }

  @Test
  void musterCheckPassesOnEveryHostAndNamesASilentHostAtItsDeadline() {
    List<String> check = java(Installed.cli(), "io.muster.cli.Muster", "check", "--timeout", "60s");
    List<HostProcess> all = onEachHost("check", 3, check);
    try {
      for (HostProcess p : all) {
        assertEquals(0, p.waitFor(RUN), p.tail());
      }
    } finally {
      all.forEach(HostProcess::close);
    }

    // host3 vanishes from the network before the job starts: no refusal, no reset, just silence
    rig.host(3).cutLink();
    List<HostProcess> two = onEachHost("check-cut", 2, java(Installed.cli(), "io.muster.cli.Muster", "check",
        "--timeout", "10s"));
    try {
      for (HostProcess p : two) {
        assertEquals(1, p.waitFor(RUN), p.tail());
        String line = String.join("\n", p.stderr());
        // what the probe saw: silence, not a refusal
        assertTrue(line.contains("1 of 3 tasks missing: worker 2 at host3:2222: no answer within 500 ms"), line);
      }
    } finally {
      two.forEach(HostProcess::close);
      rig.host(3).healLink();
    }
  }
}
