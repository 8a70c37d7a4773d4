package io.muster.internal;

import java.time.Duration;

/** Durations as the messages a person reads give them: {@code 300 ms}, {@code 75 s}, {@code 10 min}, {@code 2 h}. */
public final class Durations {
  private Durations() {}

  /**
   * The largest unit that states {@code d} exactly, kept to whole numbers; seconds up to two minutes
   * and minutes up to two hours, so a timeout reads as it is usually set ({@code 90 s}, {@code 15 min}).
   */
  public static String words(Duration d) {
    long ms = d.toMillis();
    if (ms % 1000 != 0) {
      return ms + " ms";
    }
    long s = ms / 1000;
    if (s < 120 || s % 60 != 0) {
      return s + " s";
    }
    long min = s / 60;
    return min < 120 || min % 60 != 0 ? min + " min" : min / 60 + " h";
  }
}
