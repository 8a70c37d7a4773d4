package io.muster.internal;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.time.Duration;
import org.junit.jupiter.api.Test;

class DurationsTest {

  @Test
  void aDurationReadsInTheLargestUnitThatStatesItExactly() {
    assertEquals("0 s", Durations.words(Duration.ZERO));
    assertEquals("300 ms", Durations.words(Duration.ofMillis(300)));
    assertEquals("1500 ms", Durations.words(Duration.ofMillis(1500)));
    assertEquals("5 s", Durations.words(Duration.ofSeconds(5)));
    assertEquals("60 s", Durations.words(Duration.ofMinutes(1)));
    assertEquals("75 s", Durations.words(Duration.ofSeconds(75)));
    assertEquals("119 s", Durations.words(Duration.ofSeconds(119)));
    assertEquals("2 min", Durations.words(Duration.ofMinutes(2)));
    assertEquals("150 s", Durations.words(Duration.ofSeconds(150)));
    assertEquals("10 min", Durations.words(Duration.ofMinutes(10)));
    assertEquals("90 min", Durations.words(Duration.ofMinutes(90)));
    assertEquals("2 h", Durations.words(Duration.ofHours(2)));
    assertEquals("150 min", Durations.words(Duration.ofMinutes(150)));
    assertEquals("48 h", Durations.words(Duration.ofDays(2)));
  }
}
