package io.muster.internal;

import java.time.Duration;
import java.time.format.DateTimeParseException;

/**
 * Durations as a person writes them on a command line ({@code 500ms}, {@code 60s}, {@code 5m},
 * {@code 1h}, or ISO-8601's {@code PT1M}) and reads them in messages ({@code 300 ms}, {@code 75 s},
 * {@code 10 min}, {@code 2 h}).
 */
public final class Durations {
  private Durations() {}

  /**
   * The positive duration {@code text} gives for {@code option}.
   *
   * @throws IllegalArgumentException naming the option and what it takes
   */
  public static Duration parse(String option, String text) {
    try {
      Duration d;
      if (text.matches("\\d+ms")) {
        d = Duration.ofMillis(Long.parseLong(text.substring(0, text.length() - 2)));
      } else if (text.matches("\\d+[smh]")) {
        long n = Long.parseLong(text.substring(0, text.length() - 1));
        d = switch (text.charAt(text.length() - 1)) {
          case 's' -> Duration.ofSeconds(n);
          case 'm' -> Duration.ofMinutes(n);
          default -> Duration.ofHours(n);
        };
      } else {
        d = Duration.parse(text);
      }
      if (!d.isNegative() && !d.isZero()) {
        return d;
      }
    } catch (DateTimeParseException | NumberFormatException e) {
      // fall through to the usage error
    }
    throw new IllegalArgumentException(option + " must be a positive duration such as 500ms, 60s, 5m or 1h; was '"
        + text + "'");
  }

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
