package io.muster.rig;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Collectors;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * A cluster of emulated hosts on this machine: {@code host1..hostN}, each a network namespace with
 * its own address in a range reserved for test labs ({@code 198.18.K.0/24}, RFC 2544), joined to one
 * bridge by a veth pair, with its own host name (a UTS namespace), an {@code /etc/hosts} naming every
 * host, and its own {@code /tmp} (a mount namespace over its scratch directory). The repository, the
 * JDK and the Maven cache are shared, as a cluster's software image is; nothing else passes between
 * hosts but the network. The bridge has an address too, so the test itself (in this machine's own
 * namespace) can reach the hosts as a client would.
 *
 * <p>Faults, per host: a silently cut link (the host's port leaves the bridge: no reset, no
 * refusal, packets simply vanish, as behind a dead switch port), healing it, a rate limit, and
 * killing every process of the host. {@link #close} ends every process the hosts hold (by PID) and
 * deletes the namespaces, the bridge and the hosts files; a rig left by a test JVM that died is
 * removed by the next one. Needs root and iproute2 ({@link #unavailable} says why not).
 */
public final class EmulatedHosts implements AutoCloseable {

  private static final Logger log = LoggerFactory.getLogger(EmulatedHosts.class);
  // names carry the test JVM's PID and the rig's number in it (rigs of one JVM follow one another)
  private static final Pattern OURS = Pattern.compile("mu(\\d+)x\\d+-host\\d+");
  private static final Pattern OUR_BRIDGE = Pattern.compile("\\d+: (mub(\\d+)x\\d+):.*");
  private static final AtomicInteger RIGS = new AtomicInteger();
  private static final Duration COMMAND_TIMEOUT = Duration.ofSeconds(30);

  private final Path dir;
  private final String bridge;
  private final List<Host> hosts = new ArrayList<>();
  private final Thread cleanup = new Thread(this::close, "muster-rig-cleanup");
  private boolean closed;

  private EmulatedHosts(Path dir, String bridge) {
    this.dir = dir;
    this.bridge = bridge;
  }

  /** Why the rig cannot run on this machine, or empty when it can. */
  public static Optional<String> unavailable() {
    if (!System.getProperty("os.name", "").toLowerCase().contains("linux")) {
      return Optional.of("emulated hosts need Linux network namespaces; this is " + System.getProperty("os.name"));
    }
    try {
      if (!exec(List.of("id", "-u")).strip().equals("0")) {
        return Optional.of("emulated hosts need root (network namespaces, veth pairs, a bridge)");
      }
      exec(List.of("ip", "netns", "list"));
      exec(List.of("unshare", "--version"));
      return Optional.empty();
    } catch (RuntimeException e) {
      return Optional.of("emulated hosts need iproute2's ip and util-linux's unshare: " + e.getMessage());
    }
  }

  /**
   * Creates {@code count} hosts with their scratch directories under {@code dir}, emptied first (every
   * host sees it at the same path; keep it out of {@code /tmp}, which each host has of its own).
   */
  public static EmulatedHosts create(Path dir, int count) {
    removeLeftovers();
    String id = ProcessHandle.current().pid() + "x" + RIGS.incrementAndGet() % 10;
    int subnet = (int) ((ProcessHandle.current().pid() + RIGS.get()) % 250) + 1;
    EmulatedHosts rig = new EmulatedHosts(dir, "mub" + id);
    Runtime.getRuntime().addShutdownHook(rig.cleanup);
    try {
      deleteRecursively(dir); // a fresh cluster: no earlier run's HDFS, work directories or logs
      Files.createDirectories(dir);
      exec(List.of("ip", "link", "add", rig.bridge, "type", "bridge"));
      exec(List.of("ip", "addr", "add", "198.18." + subnet + ".254/24", "dev", rig.bridge));
      exec(List.of("ip", "link", "set", rig.bridge, "up"));
      for (int i = 1; i <= count; i++) {
        rig.hosts.add(new Host(rig, "host" + i, "mu" + id + "-host" + i, "mu" + id + "h" + i,
            "198.18." + subnet + "." + i, dir.resolve("host" + i)));
      }
      String hostsFile = "127.0.0.1 localhost\n" + rig.hosts.stream().map(h -> h.address() + " " + h.name())
          .collect(Collectors.joining("\n")) + "\n";
      for (Host host : rig.hosts) {
        host.create(hostsFile);
      }
      log.info("emulated hosts up: {}", rig.hosts);
      return rig;
    } catch (IOException | RuntimeException e) {
      rig.close();
      throw e instanceof IOException io ? new UncheckedIOException(io) : (RuntimeException) e;
    }
  }

  public List<Host> hosts() {
    return List.copyOf(hosts);
  }

  /** {@code host(1)} is {@code host1}. */
  /** {@code host<number>}, from 1. */
  public Host host(int number) {
    return hosts.get(checkHost(number, hosts.size()) - 1);
  }

  /** {@code number}, when a rig of {@code count} hosts has it. */
  static int checkHost(int number, int count) {
    if (number < 1 || number > count) {
      throw new IllegalArgumentException("there is no host" + number + " on this rig: it has host1..host" + count);
    }
    return number;
  }

  Path dir() {
    return dir;
  }

  String bridge() {
    return bridge;
  }

  /** Ends every process of every host, then deletes the hosts and the bridge. */
  @Override
  public synchronized void close() {
    if (closed) {
      return;
    }
    closed = true;
    for (Host host : hosts) {
      host.killAll();
    }
    for (Host host : hosts) {
      host.delete();
    }
    tryExec(List.of("ip", "link", "del", bridge));
    if (Thread.currentThread() != cleanup) {
      try {
        Runtime.getRuntime().removeShutdownHook(cleanup);
      } catch (IllegalStateException shuttingDown) {
        // the hook is running or about to
      }
    }
  }

  /** Deletes the namespaces and bridges of rigs whose test JVM is gone. */
  private static void removeLeftovers() {
    for (String line : exec(List.of("ip", "netns", "list")).lines().toList()) {
      String name = line.split(" ")[0];
      Matcher m = OURS.matcher(name);
      if (m.matches() && ProcessHandle.of(Long.parseLong(m.group(1))).isEmpty()) {
        log.warn("removing {}, left by a rig whose test JVM is gone", name);
        Host.killAll(name);
        tryExec(List.of("ip", "netns", "del", name));
        deleteRecursively(Path.of("/etc/netns", name));
      }
    }
    for (String line : exec(List.of("ip", "-o", "link", "show", "type", "bridge")).lines().toList()) {
      Matcher m = OUR_BRIDGE.matcher(line);
      if (m.matches() && ProcessHandle.of(Long.parseLong(m.group(2))).isEmpty()) {
        tryExec(List.of("ip", "link", "del", m.group(1)));
      }
    }
  }

  static void deleteRecursively(Path path) {
    if (!Files.exists(path)) {
      return;
    }
    try (var walk = Files.walk(path)) {
      for (Path p : walk.sorted(java.util.Comparator.reverseOrder()).toList()) {
        Files.deleteIfExists(p);
      }
    } catch (IOException e) {
      log.warn("cannot delete {}: {}", path, e.toString());
    }
  }

  /** Runs a short command of the rig's own; its stdout, or an exception with its stderr. */
  static String exec(List<String> command) {
    try {
      Path err = Files.createTempFile("rig-cmd", ".err");
      try {
        Process p = new ProcessBuilder(command).redirectError(err.toFile()).start();
        String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        if (!p.waitFor(COMMAND_TIMEOUT.toSeconds(), TimeUnit.SECONDS)) {
          p.destroyForcibly();
          throw new IllegalStateException(String.join(" ", command) + " still running after " + COMMAND_TIMEOUT);
        }
        if (p.exitValue() != 0) {
          throw new IllegalStateException(String.join(" ", command) + " exited with " + p.exitValue() + ": "
              + Files.readString(err).strip());
        }
        return out;
      } finally {
        Files.deleteIfExists(err);
      }
    } catch (IOException e) {
      throw new UncheckedIOException("cannot run " + String.join(" ", command) + ": " + e.getMessage(), e);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new IllegalStateException("interrupted running " + String.join(" ", command), e);
    }
  }

  /** {@link #exec}, for clean-up: a failure is logged, not thrown. */
  static void tryExec(List<String> command) {
    try {
      exec(command);
    } catch (RuntimeException e) {
      log.warn("{}", e.getMessage());
    }
  }
}
