package io.muster.rig;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * One emulated host of {@link EmulatedHosts}: its name ({@code host2}), its address, its scratch
 * directory (its {@code /tmp} is {@code scratch/tmp}), the processes started on it, and its faults.
 */
public final class Host {

  private static final Logger log = LoggerFactory.getLogger(Host.class);
  /** Inside the host: its name, its own /tmp, then the command (sh's $1, $2, then "$@"). */
  private static final String ENTER = "hostname \"$1\" && mount --bind \"$2\" /tmp && shift 2 && exec \"$@\"";

  private final EmulatedHosts rig;
  private final String name;
  private final String namespace;
  private final String port;
  private final String address;
  private final Path scratch;

  Host(EmulatedHosts rig, String name, String namespace, String port, String address, Path scratch) {
    this.rig = rig;
    this.name = name;
    this.namespace = namespace;
    this.port = port;
    this.address = address;
    this.scratch = scratch;
  }

  /** {@code host2}: what every host's {@code /etc/hosts} calls it. */
  public String name() {
    return name;
  }

  /** Its address on the rig's network, which the test's own namespace reaches too. */
  public String address() {
    return address;
  }

  /** This host's own directory (shared path, its own contents); its {@code /tmp} is {@code tmp} in it. */
  public Path scratch() {
    return scratch;
  }

  void create(String hostsFile) throws IOException {
    Files.createDirectories(scratch.resolve("tmp"));
    Path etc = Path.of("/etc/netns", namespace);
    Files.createDirectories(etc);
    Files.writeString(etc.resolve("hosts"), hostsFile); // ip netns exec binds it over /etc/hosts
    EmulatedHosts.exec(List.of("ip", "netns", "add", namespace));
    // The host's end is created inside its namespace, then named eth0 there.
    EmulatedHosts.exec(List.of("ip", "link", "add", port, "type", "veth", "peer", "name", port + "p", "netns",
        namespace));
    EmulatedHosts.exec(List.of("ip", "link", "set", port, "master", rig.bridge(), "up"));
    inNamespace("ip", "link", "set", port + "p", "name", "eth0");
    inNamespace("ip", "addr", "add", address + "/24", "dev", "eth0");
    inNamespace("ip", "link", "set", "eth0", "up");
    inNamespace("ip", "link", "set", "lo", "up");
  }

  private String inNamespace(String... command) {
    List<String> full = new ArrayList<>(List.of("ip", "netns", "exec", namespace));
    full.addAll(List.of(command));
    return EmulatedHosts.exec(full);
  }

  /**
   * The local address ({@code 198.18.3.4:2222}, {@code 0.0.0.0:8080}, {@code [::]:9000}) of every TCP
   * socket listening on this host; an IPv4 address a dual-stack socket is bound to is written as IPv4.
   */
  public List<String> listeningAddresses() {
    return inNamespace("ss", "-ltnH").lines().map(l -> l.trim().split("\\s+")).filter(f -> f.length >= 4)
        .map(f -> f[3].replaceFirst("^\\[::ffff:([0-9.]+)]", "$1")).toList();
  }

  /**
   * Starts {@code command} on this host, its stdout and stderr in {@code <name>.out} and
   * {@code <name>.err} under the rig's {@code logs/<host>}; the environment is a clean one (a
   * host's own, not the test JVM's) plus {@code env}.
   */
  public HostProcess start(String processName, List<String> command, Map<String, String> env) {
    List<String> full = new ArrayList<>(List.of("ip", "netns", "exec", namespace, "unshare", "--uts", "--mount",
        "--propagation", "private", "--", "sh", "-c", ENTER, "sh", name, scratch.resolve("tmp").toString()));
    full.addAll(command);
    Path logs = rig.dir().resolve("logs").resolve(name);
    try {
      Files.createDirectories(logs);
      ProcessBuilder builder = new ProcessBuilder(full).directory(scratch.toFile())
          .redirectOutput(logs.resolve(processName + ".out").toFile())
          .redirectError(logs.resolve(processName + ".err").toFile());
      builder.environment().clear();
      builder.environment().put("PATH", System.getenv().getOrDefault("PATH", "/usr/bin:/bin"));
      builder.environment().put("HOME", System.getProperty("user.home"));
      builder.environment().put("LANG", "C.UTF-8");
      builder.environment().put("JAVA_HOME", System.getProperty("java.home"));
      builder.environment().putAll(env);
      // ip netns exec, unshare and sh each exec the next: the PID is the command's own.
      return new HostProcess(this, processName, builder.start(), logs.resolve(processName + ".out"),
          logs.resolve(processName + ".err"));
    } catch (IOException e) {
      throw new UncheckedIOException("cannot start " + processName + " on " + name + ": " + e.getMessage(), e);
    }
  }

  /** Cuts this host's link silently: its port leaves the bridge; nothing is refused or reset. */
  public void cutLink() {
    EmulatedHosts.exec(List.of("ip", "link", "set", port, "nomaster"));
  }

  /** Puts this host's port back on the bridge. */
  public void healLink() {
    EmulatedHosts.exec(List.of("ip", "link", "set", port, "master", rig.bridge()));
  }

  /** Limits this host's link to {@code rate} ({@code 1gbit}) both ways: a token bucket on each end. */
  public void limitRate(String rate) {
    checkRate(rate);
    List<String> tbf = List.of("root", "tbf", "rate", rate, "burst", "1mb", "latency", "50ms");
    List<String> out = new ArrayList<>(List.of("tc", "qdisc", "replace", "dev", "eth0"));
    out.addAll(tbf);
    inNamespace(out.toArray(String[]::new));
    List<String> in = new ArrayList<>(List.of("tc", "qdisc", "replace", "dev", port));
    in.addAll(tbf);
    EmulatedHosts.exec(in);
  }

  /** Takes the limit of {@link #limitRate} off both ends of this host's link. */
  public void unlimitRate() {
    inNamespace("tc", "qdisc", "del", "dev", "eth0", "root");
    EmulatedHosts.exec(List.of("tc", "qdisc", "del", "dev", port, "root"));
  }

  /** {@code rate}, when it is one of tc's rates ({@code 10mbit}, {@code 1gbit}, {@code 500kbps}). */
  static String checkRate(String rate) {
    if (rate == null || !rate.matches("\\d+(\\.\\d+)?([kmgt]?bit|[kmgt]?bps)")) {
      throw new IllegalArgumentException("rate '" + rate + "' is not a tc rate: a number and a unit, such as 10mbit, "
          + "1gbit or 500kbps");
    }
    return rate;
  }

  /** The PIDs of the processes running on this host now. */
  public List<Long> processes() {
    return pids(namespace);
  }

  /** Kills every process on this host (SIGKILL, as a power cut would end them) and waits until they are gone. */
  public void killAll() {
    killAll(namespace);
  }

  static void killAll(String namespace) {
    long deadline = System.nanoTime() + Duration.ofSeconds(10).toNanos();
    List<ProcessHandle> left;
    do {
      left = pids(namespace).stream().flatMap(pid -> ProcessHandle.of(pid).stream()).toList();
      left.forEach(ProcessHandle::destroyForcibly);
      if (!left.isEmpty()) {
        try {
          Thread.sleep(50);
        } catch (InterruptedException e) {
          Thread.currentThread().interrupt();
          return;
        }
      }
    } while (!left.isEmpty() && System.nanoTime() < deadline);
    if (!left.isEmpty()) {
      log.warn("{}: processes still there 10 s after SIGKILL: {}", namespace, left);
    }
  }

  private static List<Long> pids(String namespace) {
    try {
      return EmulatedHosts.exec(List.of("ip", "netns", "pids", namespace)).lines().map(String::strip)
          .filter(l -> !l.isEmpty()).map(Long::parseLong).toList();
    } catch (RuntimeException e) {
      return List.of(); // the namespace is gone
    }
  }

  void delete() {
    EmulatedHosts.tryExec(List.of("ip", "netns", "del", namespace));
    EmulatedHosts.deleteRecursively(Path.of("/etc/netns", namespace));
  }

  @Override
  public String toString() {
    return name + " (" + address + ")";
  }
}
