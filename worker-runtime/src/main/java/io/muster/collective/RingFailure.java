package io.muster.collective;

import io.muster.cluster.TaskId;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.Consumer;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The state of a ring's abort protocol. The first failure wins: its reason, and what caused it,
 * are what every later call throws, whichever rank or thread fails the ring after it. On the first
 * failure the ring stops (it stops reading, passes the reason on to the next rank in an ABORT
 * frame, closes its streams) and the group hears of it, so it fails its other rings. A failure
 * this rank saw itself (a broken stream, a peer out of step, a silence), rather than one passed on
 * to it, is told once more to a listener: the strategy reports it to the coordination service.
 */
final class RingFailure {

  /** Told once, on the thread that saw it, of a failure this rank saw first (not one passed on to it). */
  interface Listener {
    /** @param brokenPeer the neighbour whose stream broke, when that is the failure */
    void failed(String reason, TaskId brokenPeer);
  }

  private record First(String reason, Throwable cause) {}

  private record Seen(String reason, TaskId peer) {}

  private static final Logger log = LoggerFactory.getLogger(RingFailure.class);

  /** What the ring does on its first failure, given the reason: stop its streams and pass the reason on. */
  private final Consumer<String> stopRing;
  private final AtomicReference<First> first = new AtomicReference<>();
  /** Told of every failure of this ring, on the thread that failed it: the group fails its other rings with it. */
  private volatile Consumer<String> onFailed = reason -> { };
  private volatile Listener listener;
  /** Set when this rank saw the failure first (not passed on to it); the listener hears of it once. */
  private volatile Seen firstSeen;
  private final AtomicBoolean told = new AtomicBoolean();

  RingFailure(Consumer<String> stopRing) {
    this.stopRing = stopRing;
  }

  boolean happened() {
    return first.get() != null;
  }

  /** Throws if the ring has failed. */
  void check() {
    if (happened()) {
      throw exception();
    }
  }

  /**
   * Fails the ring for a cause this rank saw itself, and tells the listener; {@code brokenPeer} is
   * the neighbour whose stream broke, or null.
   */
  CollectiveException seen(String reason, TaskId brokenPeer, Throwable cause) {
    if (failFirst(reason, cause)) {
      firstSeen = new Seen(reason, brokenPeer);
      tell();
    }
    return exception();
  }

  /** Fails the ring (the first reason wins) for a cause passed on to it or decided elsewhere. */
  CollectiveException fail(String reason, Throwable cause) {
    failFirst(reason, cause);
    return exception();
  }

  private boolean failFirst(String reason, Throwable cause) {
    if (!first.compareAndSet(null, new First(reason, cause))) {
      return false;
    }
    log.error("collectives failed: {}", reason);
    stopRing.accept(reason);
    onFailed.accept(reason);
    return true;
  }

  /** The ring's failure, as every call after it throws it: the first reason, with its cause. */
  CollectiveException exception() {
    First failed = first.get();
    return new CollectiveException("Collective ops is aborted by: " + failed.reason()
        + "\nThe error could be from a previous operation. Restart your program to reset.", failed.cause());
  }

  /**
   * Sets what is told of a failure of this ring (its own, or passed on to it): once, or twice when
   * the ring fails while it is set, so {@code action} must bear being repeated.
   */
  void onFailed(Consumer<String> action) {
    onFailed = action;
    First failed = first.get();
    if (failed != null) {
      action.accept(failed.reason());
    }
  }

  /** Sets the listener; when the ring has already failed here, it is told at once. */
  void onFailure(Listener value) {
    listener = value;
    tell();
  }

  private void tell() {
    Seen seen = firstSeen;
    Listener l = listener;
    if (seen != null && l != null && told.compareAndSet(false, true)) {
      try {
        l.failed(seen.reason(), seen.peer());
      } catch (RuntimeException e) {
        log.warn("the collective failure listener threw", e);
      }
    }
  }
}
