package io.muster.bench;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.muster.internal.Json;
import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/**
 * {@code muster bench allreduce}'s output contract, which {@code ../shared/bench/run-anchors.sh}
 * reads: one JSON line per size with the fields it needs, and the algorithm the size took.
 */
class AllReduceBenchTest {

  @Test
  void eachSizeIsOneJsonLineNamingTheAlgorithmItTook() throws Exception {
    ByteArrayOutputStream captured = new ByteArrayOutputStream();
    PrintStream original = System.out;
    System.setOut(new PrintStream(captured, true, StandardCharsets.UTF_8));
    try {
      AllReduceBench.parse(List.of("2", "4K", "128K")).run();
    } finally {
      System.setOut(original);
    }
    List<Map<?, ?>> lines = new ArrayList<>();
    for (String line : captured.toString(StandardCharsets.UTF_8).split("\n")) {
      lines.add((Map<?, ?>) Json.parse(line));
    }
    assertEquals(2, lines.size(), captured.toString(StandardCharsets.UTF_8));
    String[] algorithms = {"gather", "ring"};
    long[] sizes = {4096, 131072};
    for (int i = 0; i < 2; i++) {
      Map<?, ?> line = lines.get(i);
      assertEquals("muster-ring", line.get("method"));
      assertEquals(2L, ((Number) line.get("ranks")).longValue());
      assertEquals(sizes[i], ((Number) line.get("bytes")).longValue());
      assertEquals(algorithms[i], line.get("algorithm"));
      assertEquals(false, line.get("tls"));
      double median = ((Number) line.get("median_s")).doubleValue();
      double mean = ((Number) line.get("mean_s")).doubleValue();
      assertTrue(median > 0 && median < 1 && mean > 0 && mean < 1, line.toString());
      assertTrue(((Number) line.get("ops")).longValue() >= 5, line.toString());
    }
  }
}
