package io.muster.testing;

import java.time.Clock;
import java.time.Duration;
import java.time.Instant;
import java.time.ZoneId;
import java.time.ZoneOffset;

/** A clock that moves only when a test moves it: the 10 s silences of a lifecycle run in no time. */
public final class FakeClock extends Clock {
  private volatile Instant now;

  public FakeClock() {
    this(Instant.parse("2026-12-08T00:00:00Z"));
  }

  public FakeClock(Instant start) {
    this.now = start;
  }

  /** Moves the clock on by {@code d}. */
  public synchronized void advance(Duration d) {
    now = now.plus(d);
  }

  @Override
  public Instant instant() {
    return now;
  }

  @Override
  public ZoneId getZone() {
    return ZoneOffset.UTC;
  }

  @Override
  public Clock withZone(ZoneId zone) {
    return this;
  }
}
