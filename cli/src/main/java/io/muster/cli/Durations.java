package io.muster.cli;

import java.time.Duration;
import java.time.format.DateTimeParseException;

/** Command-line durations: {@code 500ms}, {@code 60s}, {@code 5m}, {@code 1h}, or ISO-8601 ({@code PT1M}). */
final class Durations {
  private Durations() {}

  static Duration parse(String option, String text) {
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
    throw new UsageException(option + " must be a positive duration such as 500ms, 60s, 5m or 1h; was '" + text + "'");
  }
}
