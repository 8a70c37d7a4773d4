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
    rig = EmulatedHosts.create(Path.of(System.getProperty("java.io.tmpdir"), "rig-runtime"), 3);
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
