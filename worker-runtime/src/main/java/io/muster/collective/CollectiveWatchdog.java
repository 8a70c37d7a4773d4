package io.muster.collective;

import java.time.Duration;
import java.util.List;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;

/**
 * Keeps a group's rings honest between and during collectives. Every quarter of the timeout it
 * sends each ring's next rank a keepalive (so a rank busy between collectives does not look dead)
 * and fails the group when the collective in progress has had no data on any of its rings for the
 * timeout, blaming the ring the collective waits on. It also numbers the collectives: a frame of
 * another collective's number is a peer out of step.
 */
final class CollectiveWatchdog implements AutoCloseable {

  private final CollectiveGroup group;
  /** The group's main ring, then its partners; empty for a group of one. */
  private final List<Ring> rings;
  private final Duration timeout;
  private final ScheduledExecutorService timer;
  /** The collective in progress, in words; null between collectives. */
  private volatile String current;
  /** The ring the current collective waits on, which a silence is blamed on. */
  private volatile Ring waitingOn;
  private int seq;

  CollectiveWatchdog(CollectiveGroup group, List<Ring> rings, Duration timeout) {
    this.group = group;
    this.rings = List.copyOf(rings);
    this.timeout = timeout;
    if (rings.isEmpty()) {
      this.timer = null;
      return;
    }
    this.waitingOn = rings.get(0);
    this.timer = Executors.newSingleThreadScheduledExecutor(r -> {
      Thread t = new Thread(r, "muster-collective-watchdog-" + group.self().job() + "-" + group.self().index());
      t.setDaemon(true);
      return t;
    });
    long period = Math.max(50, timeout.toMillis() / 4);
    timer.scheduleAtFixedRate(() -> {
      this.rings.forEach(Ring::keepAlive);
      checkProgress();
    }, period, period, TimeUnit.MILLISECONDS);
  }

  /** Starts a collective named {@code what}: throws if the group has failed; returns its sequence number. */
  int begin(String what) {
    for (Ring r : rings) {
      r.check();
      r.lastProgressNanos = System.nanoTime();
    }
    current = what;
    return seq++;
  }

  void end() {
    current = null;
    if (!rings.isEmpty()) {
      waitingOn = rings.get(0);
    }
  }

  /** The collective in progress, in words. */
  String current() {
    return current;
  }

  /** Names the ring the current collective now waits on. */
  void waitingOn(Ring ring) {
    waitingOn = ring;
  }

  private void checkProgress() {
    String op = current;
    Ring waiting = waitingOn;
    if (op == null || rings.get(0).failed()) {
      return;
    }
    long silent = System.nanoTime() - rings.stream().mapToLong(r -> r.lastProgressNanos).max().orElseThrow();
    if (silent > timeout.toNanos()) {
      waiting.failSeen(group.self() + ": " + op + " timed out: no data from " + waiting.prev() + " for "
          + TimeUnit.NANOSECONDS.toMillis(silent) + " ms (timeout " + timeout + ")", null, null);
    }
  }

  @Override
  public void close() {
    if (timer != null) {
      timer.shutdownNow();
    }
  }
}
