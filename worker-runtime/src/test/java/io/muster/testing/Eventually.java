package io.muster.testing;

import java.time.Duration;
import java.util.function.BooleanSupplier;

/** Polls a condition until it holds; the assertion message says what did not happen in time. */
public final class Eventually {
  private Eventually() {}

  /** @return how long it took */
  public static Duration within(Duration limit, String what, BooleanSupplier condition) {
    long start = System.nanoTime();
    while (!condition.getAsBoolean()) {
      if (System.nanoTime() - start > limit.toNanos()) {
        throw new AssertionError(what + " did not happen within " + limit);
      }
      try {
        Thread.sleep(20);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        throw new AssertionError("interrupted waiting for: " + what, e);
      }
    }
    return Duration.ofNanos(System.nanoTime() - start);
  }
}
